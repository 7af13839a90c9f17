import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import { EVENT_BATCH_JOB, eventBatchJobId, REPUBLISHED_JOB, type EventJobData } from '../../src/contracts/jobs.js';
import { ConsumerProgress } from '../../src/events/progress.js';
import { EventsRepository } from '../../src/events/repository.js';
import { newId } from '../../src/shared/ids.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { taskData } from '../helpers/events.js';
import { sleep, waitFor } from '../helpers/wait.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';
import type { Job } from 'bullmq';

let env: TestEnv;
let events: EventsRepository;

beforeAll(async () => {
  env = await createTestEnv();
  events = new EventsRepository(env.db);
});
afterAll(() => env.close());

/** A recorded event and the fan-out job that carries it (the fields `track` reads). */
async function recordedJob(): Promise<Job<EventJobData> & { data: EventEnvelope }> {
  const event = buildEvent('task.created', newId('company'), taskData({ id: newId('task') }));
  await events.record([event]);
  return { name: event.type, data: event, attemptsMade: 0, attemptsStarted: 1, opts: { attempts: 3 } } as never;
}

/** `count` events recorded as one move's batch, and the batch job (as publishEventBatch adds it) on its first run. */
async function recordedBatch(count: number): Promise<{ batch: EventEnvelope[]; job: Job<EventJobData> }> {
  const company = newId('company');
  const batch = Array.from({ length: count }, () =>
    buildEvent('task.created', company, taskData({ id: newId('task') })),
  );
  const jobId = eventBatchJobId(batch);
  await events.record(batch);
  await events.assignSequences(
    batch.map((event, index) => ({ event, sequence: index + 1, publishJob: jobId })),
    true,
  );
  const job = {
    id: jobId,
    name: EVENT_BATCH_JOB,
    data: { events: batch },
    attemptsMade: 0,
    attemptsStarted: 1,
    opts: { attempts: 3 },
  };
  return { batch, job: job as never };
}

const notQueued = { concurrency: 50, jobExists: async () => false };

/** A write that completes when the test says so. */
function pendingWrite() {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

describe('ConsumerProgress.track with writes alongside', () => {
  it('records the event finished only once they are written, then completes the job', async () => {
    const progress = new ConsumerProgress('hook-fanout', events, notQueued);
    const job = await recordedJob();
    const attemptWrite = pendingWrite();
    let settled = false;
    const done = progress
      .track(async (_event, _job, alongside) => {
        alongside(attemptWrite.promise);
        return 'sent';
      })(job)
      .finally(() => (settled = true));

    // While the attempt's write is under way the event is not finished (its retry may live in that record)...
    await sleep(100);
    expect(await events.isFinished('hook-fanout', job.data)).toBe(false);
    expect(settled).toBe(false);
    // ...and once it is written, the event is recorded finished before the job completes.
    attemptWrite.resolve();
    expect(await done).toBe('sent');
    expect(await events.isFinished('hook-fanout', job.data)).toBe(true);
    await progress.close();
  });

  it('fails the job when a write alongside fails, even one that fails before the processor returns', async () => {
    const progress = new ConsumerProgress('hook-fanout', events, notQueued);
    const job = await recordedJob();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const run = progress.track(async (_event, _job, alongside) => {
        alongside(Promise.reject(new Error('attempt not written')));
        await sleep(20); // the rejection happens while the processor still runs
        return 'sent';
      })(job);
      await expect(run).rejects.toThrow('attempt not written');
      await sleep(20);
      expect(unhandled).toEqual([]);
      // Not finished: the job's retry runs the event again, so the attempt is not lost with its record.
      expect(await events.isFinished('hook-fanout', job.data)).toBe(false);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await progress.close();
    }
  });
});

describe("ConsumerProgress.track with a move's batch", () => {
  it("frees an event's slot once it is processed: the next event runs while the first one's records are written", async () => {
    const progress = new ConsumerProgress('hook-fanout', events, { ...notQueued, concurrency: 1 });
    const { batch, job } = await recordedBatch(2);
    const firstWrite = pendingWrite();
    const ran: string[] = [];
    const run = progress.track(async (event, _job, alongside) => {
      ran.push(event.event_id);
      if (ran.length === 1) alongside(firstWrite.promise);
      return event.event_id;
    })(job);
    // One slot: the second event runs only after the first has left it, its attempt's write still pending.
    expect(await waitFor(() => ran.length === 2, 5_000)).toBe(true);
    firstWrite.resolve();
    expect(await run).toEqual(batch.map((event) => event.event_id));
    await progress.close();
  });

  it('lets at most eight events per slot wait for their records: a stalled write holds up the sends after them', async () => {
    const progress = new ConsumerProgress('hook-fanout', events, { ...notQueued, concurrency: 1 });
    const { batch, job } = await recordedBatch(10);
    const stalled = pendingWrite();
    const ran: string[] = [];
    const run = progress.track(async (event, _job, alongside) => {
      ran.push(event.event_id);
      alongside(stalled.promise);
      return event.event_id;
    })(job);
    expect(await waitFor(() => ran.length === 8, 5_000)).toBe(true);
    await sleep(100);
    expect(ran).toHaveLength(8); // the ninth waits until records are written, not just until a slot is free
    stalled.resolve();
    expect(await run).toEqual(batch.map((event) => event.event_id));
    expect(ran).toHaveLength(10);
    await progress.close();
  });

  it('runs every event of the batch and records each; run again, it runs only the unfinished ones', async () => {
    const progress = new ConsumerProgress('automations', events, notQueued);
    const { batch, job } = await recordedBatch(5);
    const ran: string[] = [];
    const processor = progress.track(async (event) => {
      ran.push(event.event_id);
      return event.event_id;
    });
    expect(await processor(job)).toEqual(batch.map((event) => event.event_id));
    expect(ran.sort()).toEqual(batch.map((event) => event.event_id).sort());
    await progress.close();
    expect(await events.unfinishedAmong('automations', batch)).toEqual(new Set());
    expect(await events.unfinishedAmong('hook-fanout', batch)).toEqual(new Set(batch.map((event) => event.event_id)));

    // A stalled or retried run of the same job: the events finished before are not run again.
    const again = new ConsumerProgress('automations', events, notQueued);
    await events.recordFinished([]);
    await events.record(batch); // already recorded: kept as they are
    const rerun = { ...job, attemptsStarted: 2 } as Job<EventJobData>;
    ran.length = 0;
    expect(await again.track(async (event) => ran.push(event.event_id))(rerun)).toEqual([]);
    expect(ran).toEqual([]);
    await again.close();
  });

  it('fails the job when one event fails, with the others recorded; the retry runs only the failed one', async () => {
    const progress = new ConsumerProgress('hook-fanout', events, notQueued);
    const { batch, job } = await recordedBatch(4);
    const failing = batch[2]!.event_id;
    const ran: string[] = [];
    let failures = 0;
    const processor = progress.track(async (event) => {
      ran.push(event.event_id);
      if (event.event_id === failing && failures++ === 0) throw new Error('receiver lookup failed');
      return 'ok';
    });
    await expect(processor(job)).rejects.toThrow('receiver lookup failed');
    await progress.close();
    expect(await events.unfinishedAmong('hook-fanout', batch)).toEqual(new Set([failing]));

    ran.length = 0;
    expect(await processor({ ...job, attemptsMade: 1, attemptsStarted: 2 } as Job<EventJobData>)).toEqual(['ok']);
    expect(ran).toEqual([failing]);
    await progress.close();
    expect(await events.unfinishedAmong('hook-fanout', batch)).toEqual(new Set());
  });

  it('records a failed event as finished once the batch has used its last attempt', async () => {
    const progress = new ConsumerProgress('hook-fanout', events, notQueued);
    const { batch, job } = await recordedBatch(2);
    const last = { ...job, attemptsMade: 2, attemptsStarted: 3 } as Job<EventJobData>;
    await expect(progress.track(async () => Promise.reject(new Error('down')))(last)).rejects.toThrow('down');
    await progress.close();
    expect(await events.unfinishedAmong('hook-fanout', batch)).toEqual(new Set());
  });

  it('keeps events in flight within its concurrency, however many jobs carry them', async () => {
    const progress = new ConsumerProgress('automations', events, { concurrency: 3, jobExists: async () => false });
    const [first, second] = [await recordedBatch(6), await recordedBatch(6)];
    let inFlight = 0;
    let most = 0;
    const processor = progress.track(async () => {
      most = Math.max(most, ++inFlight);
      await sleep(5);
      inFlight--;
    });
    await Promise.all([processor(first.job), processor(second.job)]);
    expect(most).toBe(3);
    await progress.close();
  });

  it('a republished copy of an event does nothing while its batch is queued, and runs once the batch is gone', async () => {
    const { batch, job } = await recordedBatch(2);
    const queued = new Set([job.id!]);
    const progress = new ConsumerProgress('hook-fanout', events, {
      concurrency: 10,
      jobExists: async (jobId) => queued.has(jobId),
    });
    const event = batch[0]!;
    const copy = {
      id: event.event_id,
      name: REPUBLISHED_JOB,
      data: event,
      attemptsMade: 0,
      attemptsStarted: 1,
      opts: { attempts: 5 },
    };
    const ran: string[] = [];
    const processor = progress.track(async (run) => ran.push(run.event_id));
    expect(await processor(copy as never)).toEqual({ already_finished: true });
    expect(ran).toEqual([]);

    queued.clear(); // Redis lost the batch (or it was removed): the copy is what runs the event
    expect(await processor(copy as never)).toBe(1);
    expect(ran).toEqual([event.event_id]);
    await progress.close();
    // ...and a copy of a finished event does nothing either.
    expect(await processor(copy as never)).toEqual({ already_finished: true });
    await progress.close();
  });
});
