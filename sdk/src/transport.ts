import { randomUUID } from 'node:crypto';
import type { Middleware } from 'openapi-fetch';

export interface RetryOptions {
  /** Further attempts after the first (default 2). 0 turns retrying off. */
  retries?: number;
  /** The longest wait before an attempt, whatever `Retry-After` says (default 30 000 ms). */
  maxDelayMs?: number;
}

const sleep = (ms: number, signal?: AbortSignal | null) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason as Error);
      },
      { once: true },
    );
  });

/**
 * A request may be sent again when repeating it cannot do a thing twice: reads, PUT and DELETE, and a POST
 * with an Idempotency-Key (the service answers a repeat with the first answer). A PATCH carries a
 * `version` and would answer 409 the second time, so it is not repeated after a lost answer.
 */
function repeatable(request: Request): boolean {
  if (request.method === 'PATCH') return false;
  return request.method !== 'POST' || request.headers.has('idempotency-key');
}

/**
 * fetch with retries: after a network failure (for requests safe to repeat), and after 429 or 503
 * (refused before anything was done) following `Retry-After`. Each attempt sends the same request, so a
 * POST keeps its Idempotency-Key.
 */
export function retryingFetch(
  base: (request: Request) => Promise<Response>,
  options: RetryOptions = {},
): (request: Request) => Promise<Response> {
  const retries = options.retries ?? 2;
  const maxDelayMs = options.maxDelayMs ?? 30_000;
  return async (request) => {
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= retries;
      try {
        const response = await base(last ? request : request.clone());
        if (last || (response.status !== 429 && response.status !== 503)) return response;
        const retryAfter = Number(response.headers.get('retry-after'));
        await response.body?.cancel();
        await sleep(Math.min(maxDelayMs, Number.isFinite(retryAfter) ? retryAfter * 1000 : 1000), request.signal);
      } catch (error) {
        if (last || request.signal.aborted || !repeatable(request)) throw error;
        await sleep(Math.min(maxDelayMs, 250 * 2 ** attempt), request.signal);
      }
    }
  };
}

/** Every POST gets an Idempotency-Key unless the caller gave one, so a retry never creates twice. */
export const idempotencyKeys: Middleware = {
  onRequest({ request }) {
    if (request.method === 'POST' && !request.headers.has('idempotency-key'))
      request.headers.set('idempotency-key', randomUUID());
    return request;
  },
};
