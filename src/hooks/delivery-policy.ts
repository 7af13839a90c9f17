import type { DeliveryJob } from '../contracts/jobs.js';
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

/**
 * What a delivery job's run is: the attempt number it makes (attempts made before the job, such as the
 * fan-out's first, plus the job's runs that did not merely wait for the hook's lane) and whether it must
 * first check that the delivery has not succeeded since through another job (a recovery's run, or a
 * retry; a redelivery is sent whatever came before).
 */
export function deliveryRun(
  jobId: string,
  data: Pick<DeliveryJob, 'attempts_before' | 'deferrals'>,
  runsStarted: number,
): { attempt: number; recovering: boolean; checkDeliveredFirst: boolean } {
  const attempt = (data.attempts_before ?? 0) + runsStarted - (data.deferrals ?? 0);
  // Job ids of recoveries and redeliveries: recovery.ts recoveryJobId, service.ts redeliver.
  const recovering = jobId.includes(':recover-');
  return { attempt, recovering, checkDeliveredFirst: recovering || (attempt > 1 && !jobId.includes(':redeliver-')) };
}

/** The receiver's side of an attempt: its status code (null: no answer), and its Retry-After. */
export interface AttemptAnswer {
  statusCode: number | null;
  retryAfter?: string;
}

/** What follows an attempt. */
export type DeliveryDecision =
  | { next: 'delivered' }
  /** A hook's receiver answered 410 Gone: the hook and its delivery history go. */
  | { next: 'delete_hook' }
  | { next: 'give_up'; reason: string }
  | { next: 'retry'; delayMs: number };

export interface AttemptState {
  target: 'hook' | 'automation';
  attempt: number;
  /** The failure just recorded disabled the hook (it had been failing for DISABLE_AFTER_FAILING_MS). */
  hookDisabled: boolean;
  answeredAt: Date;
}

/**
 * The delivery decision, a pure function of the attempt's answer and the target's state: 2xx is delivered;
 * 410 deletes a hook (and ends an automation's delivery); a failure that disabled the hook gives up, and so
 * does the policy's last attempt; any other failure is retried after the policy's delay (a 429/503's longer
 * Retry-After wins). The queue wiring carries it out (workers/hooks.ts): a retry parks the job until its time,
 * so BullMQ's own retry options only re-run a job whose run crashed before it could decide.
 */
export function decideAfterAttempt(
  answer: AttemptAnswer,
  state: AttemptState,
  policy: RetryPolicy,
  random: () => number = Math.random,
): DeliveryDecision {
  const { statusCode } = answer;
  if (statusCode !== null && statusCode >= 200 && statusCode < 300) return { next: 'delivered' };
  if (statusCode === 410)
    return state.target === 'hook' ? { next: 'delete_hook' } : { next: 'give_up', reason: 'gone' };
  if (state.hookDisabled) return { next: 'give_up', reason: 'hook disabled after 5 days of failed deliveries' };
  if (state.attempt >= policy.maxAttempts) return { next: 'give_up', reason: 'attempts exhausted' };
  return { next: 'retry', delayMs: retryDelay(state.attempt, policy, answer, state.answeredAt, random) };
}

/** The failing-since time at or before which a failure at `attemptedAt` disables its hook. */
export function disableThreshold(attemptedAt: Date): Date {
  return new Date(attemptedAt.getTime() - DISABLE_AFTER_FAILING_MS);
}
