import { describe, expect, it } from 'vitest';
import {
  decideAfterAttempt,
  deliveryRun,
  disableThreshold,
  DISABLE_AFTER_FAILING_MS,
  retryPolicyFrom,
  type AttemptState,
} from './delivery-policy.js';

const policy = retryPolicyFrom({ HOOK_MAX_ATTEMPTS: 8 }); // the default schedule: 8 attempts
const answeredAt = new Date('2026-12-07T12:00:00Z');
const hookAttempt = (attempt: number, hookDisabled = false): AttemptState => ({
  target: 'hook',
  attempt,
  hookDisabled,
  answeredAt,
});
const middle = () => 0.5; // no jitter

describe('the delivery decision', () => {
  it('is delivered on any 2xx', () => {
    for (const statusCode of [200, 201, 204, 299])
      expect(decideAfterAttempt({ statusCode }, hookAttempt(3), policy)).toEqual({ next: 'delivered' });
  });

  it("deletes a hook whose receiver answers 410, and ends an automation's delivery", () => {
    expect(decideAfterAttempt({ statusCode: 410 }, hookAttempt(1), policy)).toEqual({ next: 'delete_hook' });
    expect(decideAfterAttempt({ statusCode: 410 }, { ...hookAttempt(1), target: 'automation' }, policy)).toEqual({
      next: 'give_up',
      reason: 'gone',
    });
  });

  it('retries a failure on the schedule: 5 s after the first attempt, 5 min after the second', () => {
    expect(decideAfterAttempt({ statusCode: 500 }, hookAttempt(1), policy, middle)).toEqual({
      next: 'retry',
      delayMs: 5_000,
    });
    expect(decideAfterAttempt({ statusCode: null }, hookAttempt(2), policy, middle)).toEqual({
      next: 'retry',
      delayMs: 300_000,
    });
  });

  it("waits a 429's longer Retry-After, capped at a day", () => {
    expect(decideAfterAttempt({ statusCode: 429, retryAfter: '120' }, hookAttempt(1), policy, middle)).toEqual({
      next: 'retry',
      delayMs: 120_000,
    });
    expect(decideAfterAttempt({ statusCode: 503, retryAfter: '9999999' }, hookAttempt(1), policy, middle)).toEqual({
      next: 'retry',
      delayMs: 24 * 3_600_000,
    });
  });

  it('gives up after the last attempt of the policy', () => {
    expect(decideAfterAttempt({ statusCode: 500 }, hookAttempt(8), policy)).toEqual({
      next: 'give_up',
      reason: 'attempts exhausted',
    });
    expect(decideAfterAttempt({ statusCode: 500 }, hookAttempt(7), policy, middle).next).toBe('retry');
  });

  it('gives up at once when the failure disabled the hook, whatever attempts are left', () => {
    expect(decideAfterAttempt({ statusCode: 500 }, hookAttempt(1, true), policy)).toEqual({
      next: 'give_up',
      reason: 'hook disabled after 5 days of failed deliveries',
    });
  });

  it('disables a hook failing since 5 days before the attempt, not since later', () => {
    const attemptedAt = new Date('2026-12-07T12:00:00Z');
    expect(disableThreshold(attemptedAt).getTime()).toBe(attemptedAt.getTime() - DISABLE_AFTER_FAILING_MS);
  });
});

describe("a delivery job's run", () => {
  it("counts the attempts before the job and its runs, not the runs that waited for the hook's lane", () => {
    expect(deliveryRun('hk_1:evt_1', {}, 1)).toEqual({ attempt: 1, recovering: false, checkDeliveredFirst: false });
    expect(deliveryRun('hk_1:evt_1', { attempts_before: 1 }, 1)).toEqual({
      attempt: 2,
      recovering: false,
      checkDeliveredFirst: true,
    });
    expect(deliveryRun('hk_1:evt_1', { attempts_before: 1, deferrals: 3 }, 4)).toEqual({
      attempt: 2,
      recovering: false,
      checkDeliveredFirst: true,
    });
  });

  it('checks first that a recovery has not been delivered since, and sends a redelivery whatever came before', () => {
    expect(deliveryRun('hk_1:evt_1:recover-r1', {}, 1).checkDeliveredFirst).toBe(true);
    expect(deliveryRun('hk_1:evt_1:redeliver-d1', {}, 2).checkDeliveredFirst).toBe(false);
  });
});
