import { UnauthorizedError } from '../shared/errors.js';
import type { EventActor } from './envelope.js';
import type { Scope } from './scopes.js';
import type { FastifyRequest } from 'fastify';

/** Who an external API request acts for, as the API key's authentication (src/auth) established it. */
export interface AuthContext {
  companyId: string;
  keyId: string;
  /** The user who created the key: `created_by` of records written with it, default `assigned_to`. */
  userId: string;
  scopes: ReadonlySet<Scope>;
  /** The actor of the events this key's requests cause. */
  cause: EventActor;
}

/**
 * Who a service call acts for, one name everywhere: the company every read and write is scoped to and
 * the user records are written by (an API key's creator, or an automation's owner).
 */
export type Actor = Pick<AuthContext, 'companyId' | 'userId' | 'cause'>;

declare module 'fastify' {
  interface FastifyRequest {
    auth?: AuthContext;
  }
}

/** The caller's auth context inside an ext route handler. */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new UnauthorizedError();
  return request.auth;
}
