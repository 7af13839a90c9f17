import { createHmac, timingSafeEqual } from 'node:crypto';
import { BSON, type Filter } from 'mongodb';
import { z } from 'zod';
import { ValidationError } from './errors.js';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * An integer from a query string: decimal digits only. `Number()` would also read `0x10`, `1e2`,
 * ` 16` or `16.0`, which no client means as an integer; those stay strings and fail as such.
 */
export function queryInteger<T extends z.ZodType>(schema: T) {
  return z.preprocess(
    (value) => (typeof value === 'string' && /^-?\d{1,15}$/.test(value) ? Number(value) : value),
    schema,
  );
}

/**
 * A number from a query string, in the same grammar: decimal digits, an optional minus sign and an
 * optional fraction (`-12.5`). `0x10`, `1e3`, `+1`, `.5`, ` 1` and `Infinity` are not numbers here.
 */
export function parseQueryDecimal(text: string): number | undefined {
  if (text.length > 40 || !/^-?\d+(?:\.\d+)?$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isFinite(value) ? value : undefined;
}

/**
 * A whole number within [min, max] from a query string; every refusal (not a number, a fraction, out of
 * range) says the range, so `limit=0` and `limit=250` answer "expected an integer from 1 to 200".
 */
export function boundedInteger(min: number, max: number) {
  const message = `expected an integer from ${min} to ${max}`;
  return z.number({ error: message }).int({ error: message }).min(min, { error: message }).max(max, { error: message });
}

/** `limit` 1–200, default 50; out of range is 400, never clamped (DECISIONS.md section 5). */
export const limitSchema = queryInteger(boundedInteger(1, 200).default(50));

/**
 * The byte budget of one page (DECISIONS.md section 13.4, docs/pagination.md): a page holds records
 * while their stored size stays within it, and always at least one. Approximate (BSON size of what
 * was read, not the JSON written) but bounded: a page is at most the budget, or one record.
 */
export const PAGE_BUDGET_BYTES = 1024 * 1024;

/**
 * What a stored record weighs: its BSON size, counted from the document the driver already decoded
 * (no copy, no serialization). Within a few bytes per field of its JSON for the text that dominates
 * large records; JSON escaping (quotes, backslashes, control characters) is what it does not count.
 */
export function storedSize(doc: object): number {
  return BSON.calculateObjectSize(doc);
}

export interface SortSpec {
  field: string;
  direction: 1 | -1;
}

/** `-created_at` → { field: 'created_at', direction: -1 } */
export function parseSort(sort: string): SortSpec {
  return sort.startsWith('-') ? { field: sort.slice(1), direction: -1 } : { field: sort, direction: 1 };
}

interface CursorPayload {
  /** Scope: company, sort and filters the cursor was issued for; any other use is a foreign cursor. */
  scope: string;
  /** Sort value of the last record (epoch ms for dates) and its id, the tie-breaker. */
  value: number;
  id: string;
}

/**
 * Opaque keyset cursors, HMAC-signed so that a tampered or foreign cursor is a 400 rather than a
 * silently wrong page.
 */
export class CursorCodec {
  constructor(private readonly secret: Buffer) {}

  encode(payload: CursorPayload): string {
    const body = Buffer.from(JSON.stringify([payload.scope, payload.value, payload.id])).toString('base64url');
    return `${body}.${this.sign(body)}`;
  }

  decode(cursor: string, expectedScope: string): CursorPayload {
    const invalid = ValidationError.single('cursor', 'is not a cursor issued for this list and these filters');
    const parts = cursor.split('.');
    if (parts.length !== 2) throw invalid; // `<body>.<signature>` and nothing appended
    const [body, signature] = parts as [string, string];
    if (!body || !signature) throw invalid;
    const expected = Buffer.from(this.sign(body));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw invalid;
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      throw invalid;
    }
    const decoded = z.tuple([z.string(), z.number(), z.string()]).safeParse(parsed);
    if (!decoded.success || decoded.data[0] !== expectedScope) throw invalid;
    return { scope: decoded.data[0], value: decoded.data[1], id: decoded.data[2] };
  }

  private sign(body: string): string {
    return createHmac('sha256', this.secret).update(body).digest('base64url').slice(0, 32);
  }
}

/** The query of lists paged in creation order only (pipelines, hooks): `limit` and `cursor`. */
export const idPageQuery = z.strictObject({ limit: limitSchema, cursor: z.string().max(1_000).optional() });

/**
 * One page of a small per-company list in creation order (ids sort by creation time). `fetch` gets
 * the id to start after and how many to read; the cursor is signed like the other lists' cursors.
 */
export async function pageByCreation<T extends { _id: string }>(
  codec: CursorCodec,
  scope: string,
  query: z.infer<typeof idPageQuery>,
  fetch: (afterId: string | undefined, limit: number) => Promise<Rows<T>> | Rows<T>,
): Promise<{ rows: T[]; nextCursor?: string }> {
  const after = query.cursor ? codec.decode(query.cursor, scope).id : undefined;
  return pageOf(
    await fetch(after, query.limit + 1),
    query.limit,
    () => new Date(0),
    (value, id) => codec.encode({ scope, value, id }),
  );
}

/** Records strictly after the cursor in (sort field, _id) order. */
export function afterCursor(sort: SortSpec, cursor: { value: number; id: string }): Filter<Record<string, unknown>> {
  const op = sort.direction === 1 ? '$gt' : '$lt';
  const value = new Date(cursor.value);
  return { $or: [{ [sort.field]: { [op]: value } }, { [sort.field]: value, _id: { [op]: cursor.id } }] };
}

export function mongoSort(sort: SortSpec): Record<string, 1 | -1> {
  return { [sort.field]: sort.direction, _id: sort.direction };
}

/**
 * `Link: <...>; rel="next"` (RFC 8288) and `x-next-cursor` when another page exists. `drop`: query
 * parameters the cursor replaces (the feed's `after`).
 */
export function setNextPageHeaders(
  request: FastifyRequest,
  reply: FastifyReply,
  nextCursor: string | undefined,
  options: { drop?: string[] } = {},
): void {
  if (!nextCursor) return;
  const url = new URL(request.url, 'http://placeholder');
  for (const name of options.drop ?? []) url.searchParams.delete(name);
  url.searchParams.set('cursor', nextCursor);
  reply.header('link', `<${url.pathname}${url.search}>; rel="next"`);
  reply.header('x-next-cursor', nextCursor);
}

/** A page's source: the rows of a query as an array, or better its driver cursor, read only as far as needed. */
export type Rows<T> = Iterable<T> | AsyncIterable<T>;

/**
 * One page out of `rows` (asked for with limit + 1, to learn whether there is a next one) and the cursor
 * after its last record. The page ends at `limit` records or as soon as the next record would take the
 * records past `budget` bytes (storedSize), whichever comes first, with at least one record: the cursor
 * then points after the last record returned, so paging stays exact. Reading stops there; a driver
 * cursor is closed, so what was read beyond the page is at most one batch of the driver.
 */
export async function pageOf<T extends { _id: string }>(
  rows: Rows<T>,
  limit: number,
  sortValue: (row: T) => Date,
  makeCursor: (value: number, id: string) => string,
  budget = PAGE_BUDGET_BYTES,
): Promise<{ rows: T[]; nextCursor?: string }> {
  const page: T[] = [];
  let bytes = 0;
  let more = false;
  for await (const row of rows) {
    if (page.length < limit) bytes += storedSize(row);
    if (page.length === limit || (page.length > 0 && bytes > budget)) {
      more = true;
      break;
    }
    page.push(row);
  }
  const last = page.at(-1);
  if (!more || last === undefined) return { rows: page };
  return { rows: page, nextCursor: makeCursor(sortValue(last).getTime(), last._id) };
}

/**
 * The rows of a driver cursor up to the byte budget, at least one, for a page whose `limit` is in the query
 * (the feed): its cursor then points after the last row returned. Reading stops there and the cursor is closed.
 */
export async function readWithinBudget<T extends object>(
  rows: AsyncIterable<T> & { close(): Promise<void> },
): Promise<T[]> {
  const page: T[] = [];
  let bytes = 0;
  try {
    for await (const row of rows) {
      bytes += storedSize(row);
      if (page.length > 0 && bytes > PAGE_BUDGET_BYTES) break;
      page.push(row);
    }
  } finally {
    await rows.close();
  }
  return page;
}
