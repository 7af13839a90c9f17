import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent, type EventEnvelope } from '../../src/events/envelope.js';
import { outboxOnInsert } from '../../src/events/outbox.js';
import { MOVE_ABANDONED_MS, QueueEventPublisher } from '../../src/events/queue-publisher.js';
import { relayPendingEvents } from '../../src/events/relay.js';
import { newId } from '../../src/shared/ids.js';
import {
  createQueue,
  EVENT_BATCH_JOB,
  EVENT_BATCH_MAX_BYTES,
  eventBatchJobId,
  REPUBLISHED_JOB,
  type EventJobData,
} from '../../src/shared/queues.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { eventsOfJob, taskData } from '../helpers/events.js';
import { waitFor } from '../helpers/wait.js';
import type { EventsRepository } from '../../src/events/repository.js';
import type { Queue } from 'bullmq';

// Who publishes an event when a web process's move and the relay find the same outbox: whoever
// recorded it in `events` first, and never both (no consumer runs then, so the queues show it).
let env: TestEnv;
let publisher: QueueEventPublisher;
let events: EventsRepository;
let fanout: Queue<EventJobData, unknown, string>;
const silent = pino({ level: 'silent' });

beforeAll(async () => {
  env = await createTestEnv();
  await waitFor(() => env.redis.status === 'ready'); // the publisher queues only on a ready connection
  publisher = new QueueEventPublisher(env.db, { connection: env.redis, prefix: env.config.QUEUE_PREFIX }, silent);
  events = publisher.eventStore;
  fanout = createQueue('hook-fanout', { connection: env.redis, prefix: env.config.QUEUE_PREFIX });
});
afterAll(async () => {
  await fanout?.close();
  await publisher?.close();
  await env?.close();
});

const company = newId('company');

/** A task whose outbox holds `count` new events, as a write leaves it. */
async function taskWithOutbox(count: number): Promise<{ id: string; pending: EventEnvelope[] }> {
  const id = newId('task');
  const pending = Array.from({ length: count }, () => buildEvent('task.updated', company, taskData({ task_id: id })));
  await env.db.collection('tasks').insertOne({ _id: id as never, company_id: company, ...outboxOnInsert(pending) });
  return { id, pending };
}

const outboxOf = async (id: string) =>
  ((await env.db.collection('tasks').findOne({ _id: id as never }))?.pending_events ?? []) as EventEnvelope[];
const ids = (list: EventEnvelope[]) => list.map((event) => event.event_id);
/** The publish_job of events a move put in one batch. */
const inOneBatch = (list: EventEnvelope[]) => new Map(list.map((event) => [event.event_id, eventBatchJobId(list)]));

describe("a move's batches", () => {
  it('go out as several batch jobs when the events outgrow one, each event recorded with its own', async () => {
    const id = newId('task');
    const big = 'x'.repeat(Math.ceil(EVENT_BATCH_MAX_BYTES * 0.6)); // two of these do not fit in one job
    const pending = [big, big, 'small'].map((notes) =>
      buildEvent('task.updated', company, taskData({ task_id: id, notes })),
    );
    await env.db.collection('tasks').insertOne({ _id: id as never, company_id: company, ...outboxOnInsert(pending) });
    const document = { documentId: id, companyId: company, events: pending };
    expect(await publisher.publishAndClear('tasks', [document], { batch: true })).toBe(true);

    const expected = [[pending[0]!], [pending[1]!, pending[2]!]];
    for (const carried of expected) {
      const job = await fanout.getJob(eventBatchJobId(carried));
      expect(ids(eventsOfJob(job!.data))).toEqual(ids(carried));
    }
    const recorded = await env.db
      .collection('events')
      .find({ _id: { $in: ids(pending) as never[] } })
      .project<{ _id: string; publish_job: string }>({ publish_job: 1 })
      .toArray();
    expect(Object.fromEntries(recorded.map((doc) => [doc._id, doc.publish_job]))).toEqual({
      [pending[0]!.event_id]: eventBatchJobId(expected[0]!),
      [pending[1]!.event_id]: eventBatchJobId(expected[1]!),
      [pending[2]!.event_id]: eventBatchJobId(expected[1]!),
    });
    expect(await outboxOf(id)).toEqual([]);
  });
});

describe('a move and the relay on the same outbox', () => {
  it("the relay only clears events whose move's batch is queued (the move's process died before clearing)", async () => {
    const task = await taskWithOutbox(2);
    const document = { documentId: task.id, companyId: company, events: task.pending };
    expect(await publisher.publishAndClear('tasks', [document], { batch: true })).toBe(true);
    const batch = await fanout.getJob(eventBatchJobId(task.pending));
    expect(batch?.name).toBe(EVENT_BATCH_JOB);
    expect(ids(eventsOfJob(batch!.data))).toEqual(ids(task.pending));
    // As if the move had not cleared: the outbox still holds the events when the relay comes.
    await env.db.collection('tasks').updateOne({ _id: task.id as never }, { $set: outboxOnInsert(task.pending) });

    await relayPendingEvents(env.db, publisher, silent);
    expect(await outboxOf(task.id)).toEqual([]);
    for (const event of task.pending) expect(await fanout.getJob(event.event_id)).toBeUndefined();
  });

  it("leaves a move's events alone while it may still queue them, and publishes them once it has failed", async () => {
    const recent = await taskWithOutbox(1);
    const abandoned = await taskWithOutbox(1);
    // Both recorded by a move that never queued its batch; one of them long ago.
    await events.record(recent.pending, { queued: true, publishJobs: inOneBatch(recent.pending) });
    await events.record(abandoned.pending, {
      queued: true,
      publishJobs: inOneBatch(abandoned.pending),
      now: new Date(Date.now() - MOVE_ABANDONED_MS - 1_000),
    });

    await relayPendingEvents(env.db, publisher, silent);
    expect(ids(await outboxOf(recent.id))).toEqual(ids(recent.pending));
    expect(await fanout.getJob(recent.pending[0]!.event_id)).toBeUndefined();
    expect(await outboxOf(abandoned.id)).toEqual([]);
    const copy = await fanout.getJob(abandoned.pending[0]!.event_id);
    expect(copy?.name).toBe(REPUBLISHED_JOB);
    // The consumers check the event's batch first; it is not queued, so the copy is what runs it.
    expect(await fanout.getJob(eventBatchJobId(abandoned.pending))).toBeUndefined();
    await env.db.collection('tasks').deleteOne({ _id: recent.id as never });
  });

  it('a move leaves an event the relay recorded first to the relay, in the outbox until it publishes it', async () => {
    const task = await taskWithOutbox(2);
    const [relays, moves] = task.pending as [EventEnvelope, EventEnvelope];
    await events.record([relays], { queued: true }); // the relay got there first (and has not published yet)

    const document = { documentId: task.id, companyId: company, events: task.pending };
    expect(await publisher.publishAndClear('tasks', [document], { batch: true })).toBe(true);
    const batch = await fanout.getJob(eventBatchJobId(task.pending));
    expect(ids(eventsOfJob(batch!.data))).toEqual([moves.event_id]);
    expect(ids(await outboxOf(task.id))).toEqual([relays.event_id]);

    // The relay's next pass publishes it (a copy, which BullMQ adds once) and empties the outbox.
    await relayPendingEvents(env.db, publisher, silent);
    expect((await fanout.getJob(relays.event_id))?.name).toBe(REPUBLISHED_JOB);
    expect(await outboxOf(task.id)).toEqual([]);
  });

  it("with Redis away, the relay marks a failed move's events unqueued as it takes them out of the outbox", async () => {
    const down = createRequestPathRedis('redis://127.0.0.1:1'); // nothing listens there
    down.on('error', () => {});
    const offline = new QueueEventPublisher(env.db, { connection: down, prefix: env.config.QUEUE_PREFIX }, silent);
    try {
      const task = await taskWithOutbox(1);
      // A move recorded the event long ago and died before queuing its batch.
      await events.record(task.pending, {
        queued: true,
        publishJobs: inOneBatch(task.pending),
        now: new Date(Date.now() - MOVE_ABANDONED_MS - 1_000),
      });
      await relayPendingEvents(env.db, offline, silent);
      expect(await outboxOf(task.id)).toEqual([]);
      // Not lost: the relay's next pass with Redis back queues everything `unqueued`.
      const recorded = await env.db.collection('events').findOne({ _id: task.pending[0]!.event_id as never });
      expect(recorded?.unqueued).toBe(true);
    } finally {
      await offline.close();
      down.disconnect();
    }
  });
});
