import { InsufficientScopeError, RateLimitedError } from '../shared/errors.js';
import { rateLimitRejections } from '../shared/metrics.js';
import { must } from '../shared/must.js';
import { UnknownApiKeyError, type ApiKeyAuthenticator } from './authenticator.js';
import { failedAuthRefusal, type FailedAuthThrottle } from './failed-auth-throttle.js';
import type { AuthContext } from '../contracts/auth-context.js';
import type { SlidingWindowLimiter } from '../shared/sliding-window.js';
import type { LastUsedTracker } from './last-used.js';
import type { FastifyReply, FastifyRequest } from 'fastify';

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
    // An address that kept guessing is refused before its key is even looked at (DECISIONS.md 12.4).
    const blocked = deps.failedAuthThrottle.blockedFor(request.ip);
    if (blocked !== undefined) throw failedAuthRefusal(blocked);
    let auth: AuthContext;
    try {
      auth = await deps.authenticator.authenticate(request.headers['x-api-key']);
    } catch (error) {
      // A value claiming our key format that matches nothing is a guess and counts; a missing or junk
      // key (never looked up), or a revoked or expired one, is no guess.
      if (error instanceof UnknownApiKeyError) {
        const wait = await deps.failedAuthThrottle.recordFailure(request.ip);
        if (wait !== undefined) throw failedAuthRefusal(wait);
      }
      throw error;
    }
    request.auth = auth;
    deps.lastUsed.touch(auth.companyId, auth.keyId);

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

    const { scope: required, anyScope } = request.routeOptions.config;
    if (required && !auth.scopes.has(required)) throw new InsufficientScopeError(required);
    if (anyScope && !anyScope.some((scope) => auth.scopes.has(scope)))
      throw new InsufficientScopeError(must(anyScope[0], 'a scope in anyScope'));
  };
}
