import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEventPublisher } from '../../src/container.js';
import { buildEvent, type EventEnvelope } from '../../src/contracts/envelope.js';
import { EVENT_BATCH_MAX_BYTES, eventBatchJobId, type EventJobData } from '../../src/contracts/jobs.js';
import { relayPendingEvents } from '../../src/events/relay.js';
import { newId } from '../../src/shared/ids.js';
import { outboxOnInsert } from '../../src/shared/outbox.js';
import { createQueue } from '../../src/shared/queues.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { buildTestApp, createTestEnv, type TestApp } from '../helpers/app.js';
import { eventsOfJob, outboxBacklog, taskData } from '../helpers/events.js';
import { waitFor } from '../helpers/wait.js';
import type { QueueEventPublisher } from '../../src/events/queue-publisher.js';
import type { Queue } from 'bullmq';

// The move (web process or relay) only records events; the sequencer alone gives them their place in
// the feed and publishes them, so a move and the relay on the same outbox never publish an event twice.
let env: TestApp; // an app only for its /metrics (the outbox gauge); the publishers are this file's own
let publisher: QueueEventPublisher;
let fanout: Queue<EventJobData, unknown, string>;
const silent = pino({ level: 'silent' });

beforeAll(async () => {
  env = await buildTestApp();
  await waitFor(() => env.redis.status === 'ready'); // the publisher queues only on a ready connection
  publisher = createEventPublisher(env.db, { connection: env.redis, prefix: env.config.QUEUE_PREFIX }, silent);
  fanout = createQueue('hook-fanout', { connection: env.redis, prefix: env.config.QUEUE_PREFIX });
});
afterAll(async () => {
  await fanout?.close();
  await publisher?.close();
  await env?.close();
});

const company = newId('company');

/** A task whose outbox holds these events, as a write leaves it. */
async function taskWithOutbox(pending: EventEnvelope[], id = newId('task')): Promise<string> {
  await env.db.collection('tasks').insertOne({ _id: id as never, company_id: company, ...outboxOnInsert(pending) });
  return id;
}

/** How many tasks still hold events to move (the outbox gauge of /metrics). */
const outboxBacklogOfTasks = async () => (await outboxBacklog(env.app)).tasks;
const ids = (list: EventEnvelope[]) => list.map((event) => event.event_id);
const recorded = (list: EventEnvelope[]) =>
  env.db
    .collection('events')
    .find({ _id: { $in: ids(list) as never[] } })
    .project<{ _id: string; publish_job?: string; sequence?: number; unqueued?: boolean }>({
      publish_job: 1,
      sequence: 1,
      unqueued: 1,
    })
    .toArray();

describe("the sequencer's batches", () => {
  it('go out as several batch jobs when the events outgrow one, each event with its sequence and its job', async () => {
    const id = newId('task');
    const big = 'x'.repeat(Math.ceil(EVENT_BATCH_MAX_BYTES * 0.6)); // two of these do not fit in one job
    const pending = [big, big, 'small'].map((notes) =>
      buildEvent('task.updated', company, taskData({ task_id: id, notes })),
    );
    await taskWithOutbox(pending, id);
    expect(await outboxBacklogOfTasks()).toBe(1);
    await publisher.publishAndClear('tasks', [{ documentId: id, companyId: company, events: pending }]);
    expect(await outboxBacklogOfTasks()).toBe(0);

    const docs = (await waitFor(async () => {
      const found = await recorded(pending);
      return found.every((doc) => doc.sequence !== undefined && doc.publish_job) ? found : undefined;
    }))!;
    const byId = new Map(docs.map((doc) => [doc._id, doc]));
    const sequences = pending.map((event) => byId.get(event.event_id)!.sequence!);
    expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
    for (const doc of docs) expect(doc.unqueued).toBeUndefined();
    // Two jobs: the first big event alone, then the other two; each carries the events with their sequence.
    const jobIds = [...new Set(pending.map((event) => byId.get(event.event_id)!.publish_job!))];
    expect(jobIds).toHaveLength(2);
    const carried = await Promise.all(jobIds.map(async (jobId) => eventsOfJob((await fanout.getJob(jobId))!.data)));
    expect(carried.flat().map((event) => [event.event_id, event.sequence])).toEqual(
      pending.map((event) => [event.event_id, byId.get(event.event_id)!.sequence]),
    );
    expect(jobIds[0]).toBe(eventBatchJobId([pending[0]!]));
  });

  it('the relay finding an outbox a move already recorded clears it without publishing again', async () => {
    const pending = [buildEvent('task.created', company, taskData({}))];
    const id = await taskWithOutbox(pending);
    await publisher.publishAndClear('tasks', [{ documentId: id, companyId: company, events: pending }]);
    const [first] = (await waitFor(async () => {
      const found = await recorded(pending);
      return found[0]?.publish_job ? found : undefined;
    }))!;
    // As if the move had died before clearing: the outbox still holds the event when the relay comes.
    await env.db.collection('tasks').updateOne({ _id: id as never }, { $set: outboxOnInsert(pending) });
    expect(await outboxBacklogOfTasks()).toBe(1);
    await relayPendingEvents(env.db, publisher, silent);
    expect(await outboxBacklogOfTasks()).toBe(0);
    const [again] = await recorded(pending);
    expect(again).toEqual(first);
    expect(await fanout.getJob(pending[0]!.event_id)).toBeUndefined(); // no copy beside the batch
  });

  it('with Redis away, events are sequenced all the same and left unqueued for the relay', async () => {
    const down = createRequestPathRedis('redis://127.0.0.1:1'); // nothing listens there
    down.on('error', () => {});
    // This process's own sequencer stays out of it: the offline one must hold the lease.
    await publisher.sequencer.stop();
    const offline = createEventPublisher(env.db, { connection: down, prefix: env.config.QUEUE_PREFIX }, silent);
    try {
      const pending = [buildEvent('task.created', company, taskData({}))];
      await taskWithOutbox(pending);
      expect(await outboxBacklogOfTasks()).toBe(1);
      await relayPendingEvents(env.db, offline, silent);
      expect(await outboxBacklogOfTasks()).toBe(0);
      const [doc] = (await waitFor(async () => {
        const found = await recorded(pending);
        return found[0]?.sequence !== undefined ? found : undefined;
      }))!;
      expect(doc?.unqueued).toBe(true);
      expect(doc?.publish_job).toBeUndefined();
      // Redis back: the relay queues it, as a copy with its sequence.
      await relayPendingEvents(env.db, publisher, silent);
      const job = await fanout.getJob(pending[0]!.event_id);
      expect(eventsOfJob(job!.data)[0]?.sequence).toBe(doc?.sequence);
      expect((await recorded(pending))[0]?.unqueued).toBeUndefined();
    } finally {
      await offline.close();
      down.disconnect();
    }
  });
});

describe('events recorded before sequences existed', () => {
  it('get a sequence from the first sequencer, in the order they occurred, and are not queued again', async () => {
    const legacyEnv = await createTestEnv();
    try {
      const legacyCompany = newId('company');
      const old = [0, 1, 2].map((minute) =>
        buildEvent('task.created', legacyCompany, taskData({}), {
          occurredAt: new Date(Date.now() - (3 - minute) * 60_000),
        }),
      );
      // As the earlier release stored them: queued, no sequence.
      await legacyEnv.db.collection('events').insertMany(
        old.map((event) => ({
          _id: event.event_id as never,
          company_id: legacyCompany,
          type: event.type,
          occurred_at: new Date(event.occurred_at),
          resource_id: null,
          event,
          pending: [],
          recorded_at: new Date(),
          expires_at: new Date(Date.now() + 86_400_000),
        })),
      );
      const first = createEventPublisher(
        legacyEnv.db,
        { connection: env.redis, prefix: legacyEnv.config.QUEUE_PREFIX },
        silent,
      );
      try {
        const docs = (await waitFor(async () => {
          const found = await legacyEnv.db
            .collection('events')
            .find({ company_id: legacyCompany, sequence: { $exists: true } })
            .toArray();
          return found.length === 3 ? found : undefined;
        }))!;
        const byId = new Map(docs.map((doc) => [String(doc._id), doc.sequence as number]));
        expect(old.map((event) => byId.get(event.event_id))).toEqual([1, 2, 3]);
        const queue = createQueue('hook-fanout', { connection: env.redis, prefix: legacyEnv.config.QUEUE_PREFIX });
        expect(await queue.count()).toBe(0);
        await queue.close();
      } finally {
        await first.close();
      }
    } finally {
      await legacyEnv.close();
    }
  });
});
