import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authOf } from '../auth/ext-auth.js';
import { IdempotencyInProgressError, IdempotencyMismatchError, ValidationError } from '../shared/errors.js';
import type { IdempotencyRecord, IdempotencyRepository } from './repository.js';

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: { requestHash: string; key: string; recordId?: string };
  }
}

const HEADER = 'idempotency-key';
/** Headers that describe the created resource, so a replay answers exactly like the first response. */
const REPLAYED_HEADERS = ['etag', 'location'] as const;
const VALID_KEY = /^[\x20-\x7E]{1,255}$/;
/** A claim this old belongs to a request that died; it no longer blocks its key. */
const ABANDONED_AFTER_MS = 60_000;

/** Far deeper than any valid body; a deeper one would only overflow the stack here (and fails validation anyway). */
const MAX_BODY_DEPTH = 64;

function canonicalJson(value: unknown, depth = 0): string {
  if (depth > MAX_BODY_DEPTH) throw ValidationError.single('', `the body is nested deeper than ${MAX_BODY_DEPTH} levels`);
  if (Array.isArray(value)) return `[${value.map((inner) => canonicalJson(inner, depth + 1)).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, inner]) => `${JSON.stringify(key)}:${canonicalJson(inner, depth + 1)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

function replay(reply: FastifyReply, record: IdempotencyRecord): FastifyReply {
  const response = record.response!;
  if (response.headers) reply.headers(response.headers);
  return reply
    .code(response.status)
    .header('content-type', response.content_type)
    .header('idempotent-replayed', 'true')
    .serializer((payload) => payload as string)
    .send(response.body);
}

/**
 * Stripe-style Idempotency-Key for every POST under /v1/ext/ (DECISIONS.md section 1): the first
 * response is kept per API key for 24 h; the same key and body replays it, a different body is 422,
 * and a duplicate arriving while the first still runs gets 409 (the client retries it later).
 */
export function registerIdempotency(app: FastifyInstance, repo: IdempotencyRepository): void {
  // Hash the body as the client sent it, before validation fills in defaults.
  const hashRequest = async (request: FastifyRequest) => {
    const key = request.headers[HEADER];
    if (key === undefined) return;
    if (typeof key !== 'string' || !VALID_KEY.test(key)) {
      throw ValidationError.single('Idempotency-Key', 'must be 1-255 printable ASCII characters');
    }
    const requestHash = createHash('sha256')
      .update(`${request.method} ${request.routeOptions.url} ${canonicalJson(request.params)} ${canonicalJson(request.body)}`)
      .digest('hex');
    request.idempotency = { requestHash, key };
  };

  // Claim after validation: a request rejected as invalid never ran, so nothing is stored for it.
  const claim = async (request: FastifyRequest, reply: FastifyReply) => {
    const pending = request.idempotency;
    if (!pending) return;
    const keyId = authOf(request).keyId;
    for (;;) {
      const claim = await repo.claim(keyId, pending.key, pending.requestHash);
      if (claim.claimed) {
        pending.recordId = claim.id;
        return;
      }
      const existing = claim.existing;
      if (!existing) continue; // expired between insert and read: claim again
      if (existing.request_hash !== pending.requestHash) throw new IdempotencyMismatchError();
      if (existing.state === 'completed') return replay(reply, existing);
      if (Date.now() - existing.created_at.getTime() > ABANDONED_AFTER_MS) {
        await repo.release(existing._id);
        continue;
      }
      throw new IdempotencyInProgressError();
    }
  };

  const keepResponse = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const recordId = request.idempotency?.recordId;
    if (!recordId) return payload;
    request.idempotency!.recordId = undefined;
    if (reply.statusCode >= 500) {
      await repo.release(recordId);
    } else {
      const headers: Record<string, string> = {};
      for (const name of REPLAYED_HEADERS) {
        const value = reply.getHeader(name);
        if (value !== undefined) headers[name] = String(value);
      }
      await repo.complete(recordId, {
        status: reply.statusCode,
        headers,
        body: typeof payload === 'string' ? payload : String(payload ?? ''),
        content_type: String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8'),
      });
    }
    return payload;
  };

  // On POST routes only: other requests do not pass through three hooks with nothing to do.
  app.addHook('onRoute', (route) => {
    if (![route.method].flat().includes('POST')) return;
    route.preValidation = [...[route.preValidation ?? []].flat(), hashRequest];
    route.preHandler = [...[route.preHandler ?? []].flat(), claim];
    route.onSend = [...[route.onSend ?? []].flat(), keepResponse];
  });
}
