import { createHmac } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import {
  backoffDelay,
  MAX_RETRY_AFTER_MS,
  parseRetryAfter,
  retryDelay,
  retryPolicyFrom,
  scheduledDelay,
} from '../../src/hooks/delivery-policy.js';
import { deliverWebhook, type DeliveryDeps } from '../../src/hooks/delivery.js';
import { fanOutEvent } from '../../src/hooks/fanout.js';
import { newWebhookSecret, signedHeaders } from '../../src/hooks/signing.js';
import { createRepositories } from '../../src/repositories.js';
import { loadConfig } from '../../src/shared/config.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, ext } from '../helpers/fixtures.js';
import { verifyWebhook } from './receiver.js';
import type { SendResult, WebhookRequest } from '../../src/hooks/sender.js';

const DAY = 24 * 3_600_000;

describe('retry schedule', () => {
  const HOUR = 3_600_000;

  it('by default: attempts at 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after the previous one (8, about 28 h)', () => {
    const policy = retryPolicyFrom(loadConfig({}));
    expect(policy).toMatchObject({ kind: 'schedule', maxAttempts: 8 });
    const nominal = [5_000, 300_000, 1_800_000, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];
    expect(nominal.map((_, i) => scheduledDelay(i + 1, policy, () => 0.5))).toEqual(nominal);
    const total = nominal.reduce((sum, delay) => sum + delay, 0);
    expect(total / HOUR).toBeGreaterThan(27.5);
    expect(total / HOUR).toBeLessThan(28);
    // Jitter of at most ±20%, never more.
    for (const [i, delay] of nominal.entries()) {
      expect(scheduledDelay(i + 1, policy, () => 0)).toBe(Math.round(delay * 0.8));
      expect(scheduledDelay(i + 1, policy, () => 0.999999)).toBeLessThanOrEqual(delay * 1.2);
      for (let n = 0; n < 50; n++) {
        const drawn = scheduledDelay(i + 1, policy);
        expect(drawn).toBeGreaterThanOrEqual(Math.round(delay * 0.8));
        expect(drawn).toBeLessThanOrEqual(Math.round(delay * 1.2));
      }
    }
  });

  it('HOOK_RETRY_SCHEDULE replaces the schedule (its length sets the attempts, HOOK_MAX_ATTEMPTS caps them)', () => {
    const policy = retryPolicyFrom(loadConfig({ HOOK_RETRY_SCHEDULE: '1000, 60000,3600000' }));
    expect(policy).toEqual({ kind: 'schedule', delaysMs: [1_000, 60_000, 3_600_000], maxAttempts: 4 });
    expect([1, 2, 3].map((attempt) => scheduledDelay(attempt, policy, () => 0.5))).toEqual([1_000, 60_000, 3_600_000]);
    expect(retryPolicyFrom(loadConfig({ HOOK_RETRY_SCHEDULE: '1000,2000', HOOK_MAX_ATTEMPTS: '2' })).maxAttempts).toBe(
      2,
    );
    for (const bad of ['soon', '1000,,2000', '-5', '1.5', '0']) {
      expect(() => loadConfig({ HOOK_RETRY_SCHEDULE: bad }), bad).toThrow(/HOOK_RETRY_SCHEDULE/);
    }
    expect(() => loadConfig({ HOOK_RETRY_SCHEDULE: '1000', HOOK_BACKOFF_MS: '100' })).toThrow(/not both/);
  });

  it('HOOK_BACKOFF_MS: doubles from that delay with at most ±20% jitter', () => {
    const policy = retryPolicyFrom(loadConfig({ HOOK_BACKOFF_MS: '30000' }));
    expect(policy).toEqual({ kind: 'doubling', baseMs: 30_000, maxAttempts: 8 });
    for (let attempt = 1; attempt <= 7; attempt++) {
      const nominal = 30_000 * 2 ** (attempt - 1);
      expect(scheduledDelay(attempt, policy, () => 0)).toBe(Math.round(nominal * 0.8));
      expect(backoffDelay(attempt, 30_000, () => 0.5)).toBe(nominal);
      expect(scheduledDelay(attempt, policy, () => 0.999999)).toBeLessThanOrEqual(nominal * 1.2);
    }
  });

  it('reads Retry-After as seconds or an HTTP date, and honours it on 429/503 only when longer', () => {
    const now = new Date('2026-11-22T09:30:00.000Z');
    const policy = retryPolicyFrom({ HOOK_MAX_ATTEMPTS: 8, HOOK_BACKOFF_MS: 1_000 });
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:31:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    const half = () => 0.5;
    expect(retryDelay(1, policy, { statusCode: 503, retryAfter: '60' }, now, half)).toBe(60_000);
    expect(retryDelay(1, policy, { statusCode: 429, retryAfter: '0' }, now, half)).toBe(1_000);
    expect(retryDelay(1, policy, { statusCode: 500, retryAfter: '60' }, now, half)).toBe(1_000);
    expect(retryDelay(1, policy, { statusCode: 429, retryAfter: String(10 * 24 * 3600) }, now, half)).toBe(
      MAX_RETRY_AFTER_MS,
    );
    // Under the default schedule too: the longer of the two.
    const schedule = retryPolicyFrom({ HOOK_MAX_ATTEMPTS: 8 });
    expect(retryDelay(1, schedule, { statusCode: 503, retryAfter: '60' }, now, half)).toBe(60_000);
    expect(retryDelay(2, schedule, { statusCode: 503, retryAfter: '60' }, now, half)).toBe(300_000);
  });
});

describe('signatures', () => {
  it('are Standard Webhooks: v1, base64 HMAC-SHA256 of id.timestamp.body with the decoded secret', () => {
    const secret = newWebhookSecret();
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(24);
    const body = JSON.stringify({ hello: 'wörld' });
    const at = new Date();
    const headers = signedHeaders(secret, 'evt_1', body, at);
    const timestamp = Math.floor(at.getTime() / 1000);
    const expected = createHmac('sha256', Buffer.from(secret.slice(6), 'base64'))
      .update(`evt_1.${timestamp}.${body}`)
      .digest('base64');
    expect(headers).toMatchObject({
      'webhook-id': 'evt_1',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': `v1,${expected}`,
    });
    expect(verifyWebhook(secret, { id: 'evt_1', headers, body, at: 0 })).toEqual({ hello: 'wörld' });
  });
});

describe('a hook that keeps failing', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t?.close());

  function deps(now: Date, answer: SendResult, sent: WebhookRequest[] = []): DeliveryDeps {
    const repos = createRepositories(t.db);
    return {
      hooks: repos.hooks,
      deliveries: repos.deliveries,
      secrets: repos.webhookSecrets,
      retry: retryPolicyFrom({ HOOK_MAX_ATTEMPTS: 8 }),
      logger: pino({ level: 'silent' }),
      now: () => now,
      send: async (webhook) => {
        sent.push(webhook);
        return answer;
      },
    };
  }

  it('is disabled after 5 days of failures, skipped by fan-out, listed with its failures, and re-enabled by subscribing again', async () => {
    const tenant = await createTenant(t.app);
    const target_url = 'https://hooks.example.com/flaky';
    const hook = (await ext(t.app, tenant.key, 'POST', '/hooks', { target_url, event: 'task.created' })).json();
    const event = buildEvent('task.created', tenant.companyId, { task_id: 'tsk_1' });
    const job = { event, target: { kind: 'hook' as const, hook_id: hook.hook_id } };
    const start = new Date();
    const failing: SendResult = { kind: 'response', statusCode: 500, durationMs: 3 };
    const context = { jobId: 'j', attempt: 1 };

    expect(await deliverWebhook(job, context, deps(start, failing))).toMatchObject({ outcome: 'retry' });
    const later = new Date(start.getTime() + 4 * DAY);
    expect(await deliverWebhook(job, { ...context, attempt: 2 }, deps(later, failing))).toMatchObject({
      outcome: 'retry',
    });
    // A success in between resets the clock.
    await deliverWebhook(
      job,
      { ...context, attempt: 3 },
      deps(later, { kind: 'response', statusCode: 204, durationMs: 1 }),
    );
    expect((await t.db.collection('hooks').findOne({ _id: hook.hook_id }))!.failing_since).toBeNull();

    await deliverWebhook(job, { ...context, attempt: 4 }, deps(later, failing));
    const fiveDaysOn = new Date(later.getTime() + 5 * DAY);
    expect(await deliverWebhook(job, { ...context, attempt: 5 }, deps(fiveDaysOn, failing))).toEqual({
      outcome: 'gave_up',
      reason: 'hook disabled after 5 days of failed deliveries',
    });

    const listed = (await ext(t.app, tenant.key, 'GET', '/hooks')).json();
    const { secret: _secret, ...shown } = hook;
    expect(listed).toEqual([
      { ...shown, enabled: false, disabled_reason: 'failing', disabled_at: fiveDaysOn.toISOString() },
    ]);
    const attempts = (await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json();
    expect(attempts.map((a: { attempt: number }) => a.attempt)).toEqual([5, 4, 3, 2, 1]);

    const fannedOutTo: string[] = [];
    const repos = createRepositories(t.db);
    const fanOutDeps = {
      hooks: repos.hooks,
      claim: async () => true,
      deliver: async (target: { _id: string }) => void fannedOutTo.push(target._id),
    };
    expect(await fanOutEvent(buildEvent('task.created', tenant.companyId, {}), fanOutDeps)).toBe(0);
    const sent: WebhookRequest[] = [];
    expect(await deliverWebhook(job, context, deps(fiveDaysOn, failing, sent))).toEqual({
      outcome: 'skipped',
      reason: 'hook disabled',
    });
    expect(sent).toHaveLength(0);

    // Subscribing again answers 409 hook_exists (never the secret again) and re-enables the hook.
    const again = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url, event: 'task.created' });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'hook_exists', hook_id: hook.hook_id });
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()[0].disabled_at).toBeNull();
    expect(await fanOutEvent(buildEvent('task.created', tenant.companyId, {}), fanOutDeps)).toBe(1);
    expect(fannedOutTo).toEqual([hook.hook_id]);
  });

  it('a redelivery re-enables a disabled hook', async () => {
    const tenant = await createTenant(t.app);
    const hook = (
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: 'https://hooks.example.com/x', event: '*' })
    ).json();
    const event = buildEvent('item.created', tenant.companyId, { item_id: 'itm_1' });
    const job = { event, target: { kind: 'hook' as const, hook_id: hook.hook_id } };
    await deliverWebhook(
      job,
      { jobId: 'j', attempt: 1 },
      deps(new Date(Date.now() - 6 * DAY), { kind: 'error', error: 'connection_refused', durationMs: 1 }),
    );
    await deliverWebhook(
      job,
      { jobId: 'j', attempt: 2 },
      deps(new Date(), { kind: 'error', error: 'connection_refused', durationMs: 1 }),
    );
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()[0].disabled_at).not.toBeNull();
    const response = await ext(
      t.app,
      tenant.key,
      'POST',
      `/hooks/${hook.hook_id}/deliveries/${event.event_id}/redeliver`,
    );
    expect(response.statusCode, response.body).toBe(202);
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()[0].disabled_at).toBeNull();
  });
});
