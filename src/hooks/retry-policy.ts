/** A receiver's Retry-After is honoured up to this long, so one answer cannot park a delivery for weeks. */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;
/** Deliveries that have all failed for this long disable their hook (DECISIONS.md section 9). */
export const DISABLE_AFTER_FAILING_MS = 5 * 24 * 3_600_000;

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/**
 * The delays between attempts by default (DECISIONS.md section 12.2): attempts at 0, 5 s, 5 min,
 * 30 min, 2 h, 5 h, 10 h and 10 h after the previous one; 8 attempts over about 28 hours.
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR,
];

/**
 * When the attempts of one delivery are made: a schedule of delays (the default, or
 * HOOK_RETRY_SCHEDULE), or, where HOOK_BACKOFF_MS is set, section 9's doubling from that delay.
 * `maxAttempts` counts the first attempt.
 */
export type RetryPolicy =
  | { kind: 'schedule'; delaysMs: readonly number[]; maxAttempts: number }
  | { kind: 'doubling'; baseMs: number; maxAttempts: number };

/** The policy the configuration asks for: a schedule's length sets its attempts (HOOK_MAX_ATTEMPTS caps them). */
export function retryPolicyFrom(config: {
  HOOK_MAX_ATTEMPTS: number;
  HOOK_BACKOFF_MS?: number;
  HOOK_RETRY_SCHEDULE?: readonly number[];
}): RetryPolicy {
  if (config.HOOK_BACKOFF_MS !== undefined)
    return { kind: 'doubling', baseMs: config.HOOK_BACKOFF_MS, maxAttempts: config.HOOK_MAX_ATTEMPTS };
  const delaysMs = config.HOOK_RETRY_SCHEDULE ?? DEFAULT_RETRY_SCHEDULE_MS;
  return { kind: 'schedule', delaysMs, maxAttempts: Math.min(config.HOOK_MAX_ATTEMPTS, delaysMs.length + 1) };
}

/** ±20% around a nominal delay. */
function jittered(nominalMs: number, random: () => number): number {
  return Math.round(nominalMs * (0.8 + 0.4 * random()));
}

/** Exponential backoff: `baseMs` after the first failure, doubling after each further one, ±20% jitter. */
export function backoffDelay(failedAttempt: number, baseMs: number, random: () => number = Math.random): number {
  return jittered(baseMs * 2 ** (failedAttempt - 1), random);
}

/** The wait after attempt `failedAttempt` failed (1-based) under the policy, ±20% jitter. */
export function scheduledDelay(failedAttempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
  if (policy.kind === 'doubling') return backoffDelay(failedAttempt, policy.baseMs, random);
  // Attempts beyond the schedule (a redelivery's own retries count from 1 again, so only a cap
  // above the schedule's length could ask) wait its last delay.
  const nominal = policy.delaysMs[Math.min(failedAttempt, policy.delaysMs.length) - 1] ?? 0;
  return jittered(nominal, random);
}

/** Retry-After as delta-seconds or an HTTP date, in milliseconds from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  const trimmed = value?.trim();
  if (!trimmed) return undefined;
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1_000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

/** The wait before the next attempt; a 429/503's longer Retry-After wins over the schedule. */
export function retryDelay(
  failedAttempt: number,
  policy: RetryPolicy,
  response: { statusCode: number | null; retryAfter?: string },
  now: Date,
  random: () => number = Math.random,
): number {
  const scheduled = scheduledDelay(failedAttempt, policy, random);
  if (response.statusCode !== 429 && response.statusCode !== 503) return scheduled;
  const asked = parseRetryAfter(response.retryAfter, now);
  return asked === undefined ? scheduled : Math.max(scheduled, Math.min(asked, MAX_RETRY_AFTER_MS));
}
