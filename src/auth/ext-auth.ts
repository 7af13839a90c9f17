import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SlidingWindowLimiter } from '../ratelimit/sliding-window.js';
import { rateLimitRejections } from '../shared/metrics.js';
import { InsufficientScopeError, RateLimitedError, UnauthorizedError } from '../shared/errors.js';
import { UnknownApiKeyError, type ApiKeyAuthenticator, type AuthContext } from './authenticator.js';
import type { FailedAuthThrottle } from './failed-auth-throttle.js';
import type { LastUsedTracker } from './last-used.js';

declare module 'fastify' {
  interface FastifyRequest {
    auth?: AuthContext;
  }
}

export interface ExtAuthDeps {
  authenticator: ApiKeyAuthenticator;
  rateLimiter: SlidingWindowLimiter;
  failedAuthThrottle: FailedAuthThrottle;
  lastUsed: LastUsedTracker;
}

/**
 * The checks every `/v1/ext/` request passes, in the order of DECISIONS.md section 2:
 * authentication (401), subscription (402), rate limit (429), scope (403). Runs in onRequest, so it
 * happens before the body is even parsed.
 */
export function createExtAuthHook(deps: ExtAuthDeps) {
  return async function authenticateExtRequest(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    let auth: AuthContext;
    try {
      auth = await deps.authenticator.authenticate(request.headers['x-api-key']);
    } catch (error) {
      // Guessing is throttled per client address: a well-formed key that matches nothing counts, and once
      // over the limit such failures answer 429. A missing, malformed (never looked up), revoked or
      // expired key is no guess, and a valid key from the same address (a NAT, a proxy) still gets through.
      if (error instanceof UnknownApiKeyError) {
        const wait = deps.failedAuthThrottle.blockedFor(request.ip) ?? (await deps.failedAuthThrottle.recordFailure(request.ip));
        if (wait !== undefined) {
          rateLimitRejections.inc({ reason: 'failed_auth' });
          throw new RateLimitedError(wait, 'Too many failed authentication attempts');
        }
      }
      throw error;
    }
    request.auth = auth;
    deps.lastUsed.touch(auth.keyId);

    const decision = await deps.rateLimiter.consume(auth.keyId);
    reply.headers({
      'ratelimit-limit': String(decision.limit),
      'ratelimit-remaining': String(decision.remaining),
      'ratelimit-reset': String(decision.resetSeconds),
      'ratelimit-policy': deps.rateLimiter.policy,
    });
    if (!decision.allowed) {
      rateLimitRejections.inc({ reason: 'api_key' });
      throw new RateLimitedError(decision.resetSeconds);
    }

    const required = request.routeOptions.config.scope;
    if (required && !auth.scopes.has(required)) throw new InsufficientScopeError(required);
  };
}

/** The caller's auth context inside an ext route handler. */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new UnauthorizedError();
  return request.auth;
}
