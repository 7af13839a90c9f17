import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { buildEvent } from '../contracts/envelope.js';
import { retryPolicyFrom } from './delivery-policy.js';
import { deliverWebhook, type DeliveryDeps } from './delivery.js';
import { HookLanes } from './lanes.js';
import { newWebhookSecret } from './signing.js';
import type { HookDoc } from './repository.js';

const hook: HookDoc = {
  _id: 'hk_1',
  company_id: 'cmp_1',
  target_url: 'https://hooks.example.com/in',
  event: 'task.created',
  secret: newWebhookSecret(),
  created_at: new Date(),
  disabled_at: null,
  failing_since: null,
};

describe('a delivery attempt and the hook in-flight limit', () => {
  it('frees the permit once the receiver answered, while the attempt is still being recorded', async () => {
    // One permit per hook: the next event's delivery to it waits for that permit.
    const lanes = new HookLanes({ maxInFlight: 1, concurrency: 50, timeoutMs: 10_000 });
    let recorded!: () => void;
    const recording = new Promise<void>((resolve) => (recorded = resolve));
    const recordCalls: unknown[] = [];
    const deps = {
      deliveries: {
        recordAttempt: (record: unknown) => {
          recordCalls.push(record);
          return recording; // a slow MongoDB write (or one waiting for its batch)
        },
      },
      send: async () => ({ kind: 'response', statusCode: 200, durationMs: 1, body: '' }),
      retry: retryPolicyFrom({ HOOK_MAX_ATTEMPTS: 8 }),
      logger: pino({ level: 'silent' }),
    } as unknown as DeliveryDeps;

    const first = await lanes.enterFanOut(hook._id);
    expect(first).toBeDefined();
    const event = buildEvent('task.created', hook.company_id, { task_id: 'tsk_1' });
    const delivering = deliverWebhook(
      { event, target: { kind: 'hook', hook_id: hook._id } },
      { jobId: 'job_1', attempt: 1, hook, answered: (delivered) => first!.done(delivered) },
      deps,
    );
    // The second delivery gets the permit while the first one's record is still being written.
    const second = await lanes.enterFanOut(hook._id);
    expect(second).toBeDefined();
    expect(recordCalls).toHaveLength(1);
    let settled = false;
    void delivering.then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);
    recorded();
    expect(await delivering).toEqual({ outcome: 'delivered' });
    second!.done(true);
  });
});

describe("a delivery attempt's record", () => {
  it('is handed to `alongside` when given (the fan-out waits for it with the event), not waited for here', async () => {
    const recording = new Promise<void>(() => {}); // never written: the delivery must not wait for it
    const deps = {
      deliveries: { recordAttempt: () => recording },
      send: async () => ({ kind: 'response', statusCode: 200, durationMs: 1, body: '' }),
      retry: retryPolicyFrom({ HOOK_MAX_ATTEMPTS: 8 }),
      logger: pino({ level: 'silent' }),
    } as unknown as DeliveryDeps;
    const handed: Promise<void>[] = [];
    const event = buildEvent('task.created', hook.company_id, { task_id: 'tsk_2' });
    const outcome = await deliverWebhook(
      { event, target: { kind: 'hook', hook_id: hook._id } },
      { jobId: 'job_2', attempt: 1, hook, alongside: (write) => handed.push(write) },
      deps,
    );
    expect(outcome).toEqual({ outcome: 'delivered' });
    expect(handed).toEqual([recording]);
  });
});
