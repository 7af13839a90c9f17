import { z } from 'zod';

export const SCOPES = ['items:read', 'items:write', 'tasks:read', 'tasks:write', 'hooks:manage'] as const;
export type Scope = (typeof SCOPES)[number];
export const scopeSchema = z.enum(SCOPES);

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a `/v1/ext/` route needs, declared next to the route itself. */
    scope?: Scope;
    /** Instead of `scope`: any one of these will do (the events feed shows what each allows). */
    anyScope?: Scope[];
  }
}
