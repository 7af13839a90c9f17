import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent } from '../../src/events/envelope.js';
import { ConsumerProgress } from '../../src/events/progress.js';
import { EventsRepository } from '../../src/events/repository.js';
import { newId } from '../../src/shared/ids.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { taskData } from '../helpers/events.js';
import { sleep, waitFor } from '../helpers/wait.js';
import type { EventEnvelope } from '../../src/events/envelope.js';
import type { Job } from 'bullmq';

let env: TestEnv;
let events: EventsRepository;

beforeAll(async () => {
  env = await createTestEnv();
  events = new EventsRepository(env.db);
});
afterAll(() => env.close());

/** A recorded event and the fan-out job that carries it (the fields `track` reads). */
async function recordedJob(): Promise<Job<EventEnvelope>> {
  const event = buildEvent('task.created', newId('company'), taskData({ id: newId('task') }));
  await events.record([event], { queued: true });
  return { name: event.type, data: event, attemptsMade: 0, opts: { attempts: 3 } } as unknown as Job<EventEnvelope>;
}

/** A write that completes when the test says so. */
function pendingWrite() {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

describe('ConsumerProgress.track with writes alongside', () => {
  it('records the progress without waiting for them, and completes the job only once they are written', async () => {
    const progress = new ConsumerProgress('hook-fanout', events);
    const job = await recordedJob();
    const attemptWrite = pendingWrite();
    let settled = false;
    const done = progress
      .track(async (_job, alongside) => {
        alongside(attemptWrite.promise);
        return 'sent';
      })(job)
      .finally(() => (settled = true));

    // The progress record goes out while the attempt's write is still under way...
    expect(await waitFor(() => events.isFinished('hook-fanout', job.data), 5_000)).toBe(true);
    await sleep(50);
    // ...but the job is not done before it.
    expect(settled).toBe(false);
    attemptWrite.resolve();
    expect(await done).toBe('sent');
    await progress.close();
  });

  it('fails the job when a write alongside fails, even one that fails before the processor returns', async () => {
    const progress = new ConsumerProgress('hook-fanout', events);
    const job = await recordedJob();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const run = progress.track(async (_job, alongside) => {
        alongside(Promise.reject(new Error('attempt not written')));
        await sleep(20); // the rejection happens while the processor still runs
        return 'sent';
      })(job);
      await expect(run).rejects.toThrow('attempt not written');
      await sleep(20);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await progress.close();
    }
  });
});
