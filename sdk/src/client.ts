import createFetchClient, { type Client, type MaybeOptionalInit } from 'openapi-fetch';
import { toApiError } from './errors.js';
import { idempotencyKeys, retryingFetch, type RetryOptions } from './transport.js';
import type { CursorStore } from './cursor-store.js';
import type { FeedEvent, ListPath, ListRecord, paths } from './types.js';

export interface ClientOptions {
  /** Where the service answers, e.g. `https://records.example.com` (no `/v1/ext`). */
  baseUrl: string;
  /** An API key (`prk_...`), sent as `x-api-key` on every call. */
  apiKey: string;
  /** Retries after a network failure, 429 or 503 (default: 2 more attempts). */
  retry?: RetryOptions;
  /** Another fetch (a proxy agent, a test double of the network); defaults to the global fetch. */
  fetch?: (request: Request) => Promise<Response>;
  headers?: Record<string, string>;
}

export type ListInit<P extends ListPath> = MaybeOptionalInit<paths[P], 'get'>;
type ListArgs<P extends ListPath> = object extends ListInit<P> ? [init?: ListInit<P>] : [init: ListInit<P>];

type FeedQuery = NonNullable<paths['/v1/ext/events']['get']['parameters']['query']>;

export interface TailOptions {
  /** Keeps the position between runs; loaded at start, saved after each page was consumed. */
  store?: CursorStore;
  /** The position to start from when the store holds none (an `x-next-cursor` kept elsewhere). */
  cursor?: string;
  /** Or start after this sequence (from a webhook's `sequence`) when there is no cursor. */
  after?: number;
  /** Seconds each request waits for the next event when none is readable (0–30, default 25). */
  wait?: number;
  /** Filters of the feed (`type`, `resource_id`, `exclude_actor`, ...). */
  filter?: Omit<FeedQuery, 'cursor' | 'after' | 'wait'>;
  /** Stops the tailer (the loop ends; a waiting request is aborted). */
  signal?: AbortSignal;
  /** Called on a failure the tailer rides out (the service restarting, the network gone) before it tries again. */
  onRetry?: (error: unknown, delayMs: number) => void;
}

export type PipelineRecordsClient = Client<paths> & {
  /** Every record of a list, page after page, following `x-next-cursor` until the last page. */
  list<P extends ListPath>(path: P, ...init: ListArgs<P>): AsyncGenerator<ListRecord<P>, void, undefined>;
  /** The pages of a list, each with the cursor of the next one (undefined after the last). */
  pages<P extends ListPath>(
    path: P,
    ...init: ListArgs<P>
  ): AsyncGenerator<{ records: ListRecord<P>[]; nextCursor: string | undefined }, void, undefined>;
  /**
   * The events feed, forever: every event once, in `sequence` order, from a stored position. The position
   * is saved after the consumer has taken a page's last event, so a crash replays at most one page
   * (at-least-once: dedupe by `event_id`).
   */
  tailEvents(options?: TailOptions): AsyncGenerator<FeedEvent, void, undefined>;
};

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

/**
 * The typed client: `GET`, `POST`, `PUT`, `PATCH`, `DELETE` by path, with bodies, parameters, answers and
 * problem codes typed from the OpenAPI document; an Idempotency-Key on every POST; retries; list iterators
 * and the feed tailer.
 */
export function createClient(options: ClientOptions): PipelineRecordsClient {
  const baseFetch = options.fetch ?? ((request: Request) => globalThis.fetch(request));
  const http = createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: { ...options.headers, 'x-api-key': options.apiKey },
    fetch: retryingFetch(baseFetch, options.retry),
    // `metadata.<field>[<op>]` filters are one object exploded into parameters of their own names.
    querySerializer: { object: { style: 'form', explode: true } },
  });
  http.use(idempotencyKeys);
  // openapi-fetch's methods are typed per path; the generic helpers below call them with a path chosen at run time.
  const get = http.GET as unknown as (
    path: string,
    init: unknown,
  ) => Promise<{ data?: unknown; error?: unknown; response: Response }>;

  async function* pages<P extends ListPath>(path: P, ...[init]: ListArgs<P>) {
    const base = (init ?? {}) as { params?: { query?: Record<string, unknown> } };
    let cursor = base.params?.query?.cursor as string | undefined;
    for (;;) {
      const query = { ...base.params?.query, ...(cursor ? { cursor } : {}) };
      const { data, error, response } = await get(path, { ...base, params: { ...base.params, query } });
      if (error !== undefined || !response.ok) throw toApiError(error, response);
      const records = data as ListRecord<P>[];
      cursor = response.headers.get('x-next-cursor') ?? undefined;
      // The feed has a cursor on every answer: an empty page is where it ends for now.
      const nextCursor = records.length === 0 ? undefined : cursor;
      yield { records, nextCursor };
      if (!nextCursor) return;
    }
  }

  async function* list<P extends ListPath>(path: P, ...init: ListArgs<P>) {
    for await (const page of pages(path, ...init)) yield* page.records;
  }

  async function* tailEvents(tail: TailOptions = {}) {
    const wait = tail.wait ?? 25;
    let cursor = (await tail.store?.load()) ?? tail.cursor;
    let failures = 0;
    while (!tail.signal?.aborted) {
      const position = cursor ? { cursor } : tail.after !== undefined ? { after: tail.after } : {};
      let answer;
      try {
        answer = await http.GET('/v1/ext/events', {
          params: { query: { ...tail.filter, ...position, wait } },
          signal: tail.signal,
        });
      } catch (error) {
        if (tail.signal?.aborted) return;
        const delay = Math.min(30_000, 500 * 2 ** failures++);
        tail.onRetry?.(error, delay);
        await sleep(delay, tail.signal);
        continue;
      }
      const { data, error, response } = answer;
      if (error !== undefined || !data) {
        const problem = toApiError(error, response);
        if (response.status < 500) throw problem; // a refused key or a bad cursor does not heal by waiting
        const delay = Math.min(30_000, 500 * 2 ** failures++);
        tail.onRetry?.(problem, delay);
        await sleep(delay, tail.signal);
        continue;
      }
      failures = 0;
      yield* data;
      const next = response.headers.get('x-next-cursor');
      if (next && next !== cursor) {
        cursor = next;
        await tail.store?.save(next);
      }
    }
  }

  return Object.assign(http, { list, pages, tailEvents });
}
