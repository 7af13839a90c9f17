/** A receiver's Retry-After is honoured up to this long, so one answer cannot park a delivery for weeks. */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;
/** Deliveries that have all failed for this long disable their hook (DECISIONS.md section 9). */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 3_600_000;

/** Exponential backoff: `baseMs` after the first failure, doubling after each further one, ±20% jitter. */
export function backoffDelay(failedAttempt: number, baseMs: number, random: () => number = Math.random): number {
  const nominal = baseMs * 2 ** (failedAttempt - 1);
  return Math.round(nominal * (0.8 + 0.4 * random()));
}

/** Retry-After as delta-seconds or an HTTP date, in milliseconds from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  const trimmed = value?.trim();
  if (!trimmed) return undefined;
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1_000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

/** The wait before the next attempt; a 429/503's longer Retry-After wins over the backoff. */
export function retryDelay(
  failedAttempt: number,
  baseMs: number,
  response: { statusCode: number | null; retryAfter?: string },
  now: Date,
  random: () => number = Math.random,
): number {
  const backoff = backoffDelay(failedAttempt, baseMs, random);
  if (response.statusCode !== 429 && response.statusCode !== 503) return backoff;
  const asked = parseRetryAfter(response.retryAfter, now);
  return asked === undefined ? backoff : Math.max(backoff, Math.min(asked, MAX_RETRY_AFTER_MS));
}
