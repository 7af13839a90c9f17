import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { Receiver } from './receiver.js';

// A receiver is slow when it answers after half of this; the slow one here answers after 60%.
const TIMEOUT_MS = 1_000;
const SLOW_ANSWER_MS = 600;

describe('one slow receiver does not hold up another company', () => {
  let t: TestApp;
  let workers: { close(): Promise<void> };
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    t = await buildTestApp(
      {
        RATE_LIMIT_MAX: '1000000',
        HOOK_CONCURRENCY: '2',
        HOOK_TIMEOUT_MS: String(TIMEOUT_MS),
        HOOK_BACKOFF_MS: '200',
        HOOK_MAX_ATTEMPTS: '2',
      },
      { publisher: true },
    );
    workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks']);
  });
  afterAll(async () => {
    await workers?.close();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await t?.close();
  });

  async function subscribed(answer: Receiver['answer']): Promise<{ tenant: Tenant; inbox: Receiver; hookId: string }> {
    const tenant = await createTenant(t.app);
    const inbox = await Receiver.start(answer);
    receivers.push(inbox);
    const hook = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.created' });
    expect(hook.statusCode, hook.body).toBe(201);
    return { tenant, inbox, hookId: hook.json<{ hook_id: string }>().hook_id };
  }

  /** From the event being recorded (its occurred_at) to its arrival, for each of `count` tasks created `gapMs` apart. */
  async function latencies(tenant: Tenant, inbox: Receiver, count: number, gapMs: number): Promise<number[]> {
    const before = inbox.requests.length;
    for (let i = 0; i < count; i++) {
      await createTask(t.app, tenant);
      await sleep(gapMs);
    }
    expect(await waitFor(() => inbox.requests.length >= before + count, 30_000)).toBe(true);
    return inbox.requests
      .slice(before, before + count)
      .map((request) => request.at - Date.parse((JSON.parse(request.body) as { occurred_at: string }).occurred_at));
  }

  const percentile = (values: number[], p: number) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  };

  it("with HOOK_CONCURRENCY=2, the other company's p99 stays within 2x of its unloaded value", async () => {
    const fast = await subscribed(() => 204);
    const slow = await subscribed(() => ({ status: 200, delayMs: SLOW_ANSWER_MS })); // 2xx, never failing
    await latencies(fast.tenant, fast.inbox, 3, 20); // warm up: connections, caches

    const unloaded = await latencies(fast.tenant, fast.inbox, 15, 60);

    // The slow company keeps writing throughout: an event every 100 ms, each a 600 ms delivery, three
    // times what HOOK_CONCURRENCY=2 fan-out slots could take (3.3 a second): without lanes the fan-out
    // falls further behind every second, and the other company's events wait behind it.
    let loading = true;
    const load = (async () => {
      while (loading) {
        await createTask(t.app, slow.tenant);
        await sleep(100);
      }
    })();
    await sleep(1_000);
    const loaded = await latencies(fast.tenant, fast.inbox, 20, 60);
    loading = false;
    await load;
    const hits = slow.inbox.requests.length;

    const summary = (values: number[]) => ({ p50: percentile(values, 50), p99: percentile(values, 99) });
    const figures = { unloaded: summary(unloaded), loaded: summary(loaded), slowReceiverHits: hits };
    console.log('fairness (ms):', JSON.stringify(figures));
    // The slow receiver was really being hit while the other company was measured ...
    expect(hits).toBeGreaterThanOrEqual(3);
    // ... and the other company kept its latency: p99 within 2x of unloaded, the median too. Floors
    // (300 ms, 150 ms) keep a loaded machine's noise from deciding; without lanes both grow by
    // seconds, as the slow company's backlog in the fan-out grows by several deliveries a second.
    expect(figures.loaded.p99).toBeLessThanOrEqual(2 * Math.max(figures.unloaded.p99, 300));
    expect(figures.loaded.p50).toBeLessThanOrEqual(2 * Math.max(figures.unloaded.p50, 150));

    // The slow company's deliveries wait in the other lane, each recorded in MongoDB as due (so Redis
    // losing the lane's jobs loses none), and the waits for a free slot there count as no attempt.
    const waiting = await t.db
      .collection('deliveries')
      .countDocuments({ hook_id: slow.hookId, next_attempt_at: { $ne: null } });
    expect(waiting).toBeGreaterThan(0);
    const attempts = (await ext(t.app, slow.tenant.key, 'GET', `/hooks/${slow.hookId}/deliveries`)).json<
      Array<{ attempt: number; succeeded: boolean }>
    >();
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    expect(attempts.every((attempt) => attempt.attempt === 1 && attempt.succeeded)).toBe(true);
  });
});
