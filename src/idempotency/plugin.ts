import { createHash } from 'node:crypto';
import { authOf } from '../contracts/auth-context.js';
import { IdempotencyInProgressError, IdempotencyMismatchError, ValidationError } from '../shared/errors.js';
import type { IdempotencyRecord, IdempotencyRepository } from './repository.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** `sentBody`: the body as the client sent it, kept before validation fills in defaults. */
    idempotency?: { key: string; sentBody: unknown; recordId?: string };
  }
}

const HEADER = 'idempotency-key';
/** Headers that describe the created resource, so a replay answers exactly like the first response. */
const REPLAYED_HEADERS = ['etag', 'location'] as const;
const VALID_KEY = /^[\x20-\x7E]{1,255}$/;
/** A claim this old belongs to a request that died; it no longer blocks its key. */
const ABANDONED_AFTER_MS = 60_000;

/** Key order and spacing do not make two bodies different. Only valid bodies get here, so it is small. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((inner) => canonicalJson(inner)).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, inner]) => `${JSON.stringify(key)}:${canonicalJson(inner)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * The one rule for what is kept for replay: the answer of a request that did its work (2xx). A 4xx
 * that gets this far (past validation) depends on other records at that moment (a reference that does
 * not resolve, a version, a limit, an existing record) and a 5xx is ours; neither is stored, so a
 * retry with the same key runs for real (as Stripe does not store them).
 */
export function isKeptForReplay(status: number): boolean {
  return status >= 200 && status < 300;
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
  // Keep the body as the client sent it, before validation fills in defaults; it is hashed once valid.
  const keepSentBody = async (request: FastifyRequest) => {
    const key = request.headers[HEADER];
    if (key === undefined) return;
    if (typeof key !== 'string' || !VALID_KEY.test(key)) {
      throw ValidationError.single('Idempotency-Key', 'must be 1-255 printable ASCII characters');
    }
    request.idempotency = { key, sentBody: request.body };
  };

  // Claim after validation: a request rejected as invalid never ran, so nothing is stored for it.
  const claim = async (request: FastifyRequest, reply: FastifyReply) => {
    const pending = request.idempotency;
    if (!pending) return;
    const keyId = authOf(request).keyId;
    const requestHash = createHash('sha256')
      .update(
        `${request.method} ${request.routeOptions.url} ${canonicalJson(request.params)} ${canonicalJson(pending.sentBody)}`,
      )
      .digest('hex');
    for (;;) {
      const claim = await repo.claim(keyId, pending.key, requestHash);
      if (claim.claimed) {
        pending.recordId = claim.id;
        return;
      }
      const existing = claim.existing;
      if (!existing) continue; // expired between insert and read: claim again
      if (existing.request_hash !== requestHash) throw new IdempotencyMismatchError();
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
    if (!isKeptForReplay(reply.statusCode)) {
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
        body: typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString() : '',
        content_type: String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8'),
      });
    }
    return payload;
  };

  // On POST routes only: other requests do not pass through three hooks with nothing to do.
  app.addHook('onRoute', (route) => {
    if (![route.method].flat().includes('POST')) return;
    route.preValidation = [...[route.preValidation ?? []].flat(), keepSentBody];
    route.preHandler = [...[route.preHandler ?? []].flat(), claim];
    route.onSend = [...[route.onSend ?? []].flat(), keepResponse];
  });
}
