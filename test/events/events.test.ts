import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import { EVENT_BATCH_JOB, EVENT_QUEUES, isEventBatch, type EventJobData } from '../../src/contracts/jobs.js';
import { publishEvents } from '../../src/events/queue-publisher.js';
import { clearPublished } from '../../src/shared/outbox.js';
import { createEventProducer } from '../../src/shared/queues.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { eventsOfJob, feedEvents, feedOf, outboxBacklog, taskData, waitForFeed } from '../helpers/events.js';
import { createItem, createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

let t: TestApp;
let tenant: Tenant;
let automationsQueue: Queue<EventJobData>;
let fanoutQueue: Queue<EventJobData>;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' }, { publisher: true });
  tenant = await createTenant(t.app);
  automationsQueue = new Queue('automations', { connection: t.redis, prefix: t.config.QUEUE_PREFIX });
  fanoutQueue = new Queue('hook-fanout', { connection: t.redis, prefix: t.config.QUEUE_PREFIX });
});
afterAll(async () => {
  await automationsQueue?.close();
  await fanoutQueue?.close();
  await t?.close();
});

/** Events queued for a record, oldest first (no worker runs in this file, so they stay waiting). */
async function queuedEvents(queue: Queue<EventJobData>, id: string): Promise<EventEnvelope[]> {
  const jobs = await queue.getJobs(['waiting', 'active', 'completed', 'delayed', 'prioritized']);
  return jobs
    .flatMap((job) => eventsOfJob(job.data))
    .filter((event) => event.data.task_id === id || event.data.item_id === id)
    .sort((a, b) => (a.event_id < b.event_id ? -1 : 1));
}

/** Until the record's `count` events are readable in the feed: the sequencer queues them before that (docs/events.md). */
async function settle(id: string, count: number, key = tenant.key) {
  await feedOf(t.app, key, id, count);
}

describe('events of task and item changes', () => {
  it('each trigger fires exactly its events with correct changes; a no-op PATCH fires nothing', async () => {
    const created = (
      await ext(t.app, tenant.key, 'POST', '/tasks', { title: 'Call', due_at: '2030-01-01T10:00:00Z' })
    ).json();
    const id = created.task_id;
    await ext(t.app, tenant.key, 'PATCH', `/tasks/${id}`, { title: 'Call back' });
    await ext(t.app, tenant.key, 'PATCH', `/tasks/${id}`, { title: 'Call back' }); // no-op
    const completed = (await ext(t.app, tenant.key, 'PATCH', `/tasks/${id}`, { is_completed: true })).json();
    await settle(id, 4);
    const events = await waitFor(async () => {
      const found = await queuedEvents(automationsQueue, id);
      return found.length >= 4 ? found : undefined;
    });
    expect(events?.map((event) => event.type)).toEqual([
      'task.created',
      'task.updated',
      'task.updated',
      'task.completed',
    ]);
    const [createdEvent, renamed, completion, completedEvent] = events as [
      EventEnvelope,
      EventEnvelope,
      EventEnvelope,
      EventEnvelope,
    ]; // four, as just checked
    expect(createdEvent).toMatchObject({ company_id: tenant.companyId, data: created });
    expect(createdEvent.changes).toBeUndefined();
    expect(renamed.changes).toEqual({ title: { from: 'Call', to: 'Call back' } });
    expect(completion.changes).toEqual({
      is_completed: { from: false, to: true },
      completed_at: { from: null, to: completed.completed_at },
    });
    expect(completedEvent.data).toEqual(completed);
    expect(new Set(events!.map((event) => event.event_id)).size).toBe(4);
    expect((await queuedEvents(fanoutQueue, id)).map((event) => event.event_id)).toEqual(
      events!.map((event) => event.event_id),
    );
    // The feed has the same four, each once, and the task holds none left to move (the outbox gauge).
    const feed = await feedOf(t.app, tenant.key, id, 4);
    expect(feed.map((event) => event.event_id)).toEqual(events!.map((event) => event.event_id));
    await waitFor(async () => (await outboxBacklog(t.app)).tasks === 0);
  });

  it("the web process's move goes out as one batch job per event queue, recorded with each of its events", async () => {
    const own = await createTenant(t.app);
    const ids = (
      await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          ext(t.app, own.key, 'POST', '/tasks', { title: `batched ${i}`, due_at: '2030-01-01T10:00:00Z' }),
        ),
      )
    ).map((response) => response.json().task_id as string);
    for (const id of ids) await settle(id, 1, own.key);
    const recorded = await t.db
      .collection('events')
      .find({ company_id: own.companyId })
      .project<{ _id: string; publish_job?: string }>({ publish_job: 1 })
      .toArray();
    expect(recorded).toHaveLength(6);
    const batchIds = [...new Set(recorded.map((doc) => doc.publish_job))];
    expect(batchIds.every((id) => typeof id === 'string')).toBe(true);
    expect(batchIds.length).toBeLessThan(6); // requests arriving together share a move
    for (const queue of [automationsQueue, fanoutQueue]) {
      const jobs = await Promise.all(batchIds.map((id) => queue.getJob(id!)));
      for (const job of jobs) {
        expect(job?.name).toBe(EVENT_BATCH_JOB);
        const carried = eventsOfJob(job!.data);
        expect(job!.id).toBe(`batch-${carried[0]!.event_id}`);
        for (const event of carried)
          expect(recorded.find((doc) => doc._id === event.event_id)?.publish_job).toBe(job!.id);
      }
      const carried = jobs.flatMap((job) => eventsOfJob(job!.data).map((event) => event.event_id));
      expect(carried.sort()).toEqual(recorded.map((doc) => doc._id).sort());
    }
  });

  it('item changes go to the hook fan-out with item.created and item.updated', async () => {
    const item = await createItem(t.app, tenant);
    await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { stage_id: tenant.stageIds[1] });
    await settle(item.item_id, 2);
    const events = await waitFor(async () => {
      const found = await queuedEvents(fanoutQueue, item.item_id);
      return found.length >= 2 ? found : undefined;
    });
    expect(events?.map((event) => event.type)).toEqual(['item.created', 'item.updated']);
    expect(events?.[1]?.changes).toEqual({ stage: { from: tenant.stageIds[0], to: tenant.stageIds[1] } });
  });
});

describe('the relay', () => {
  it('publishes what the API left in the outbox, once, and clears it', async () => {
    const quiet = await buildTestApp({}, {}); // no fast path: everything waits for the relay
    const own = await createTenant(quiet.app);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push(
        (await ext(quiet.app, own.key, 'POST', '/tasks', { title: `t${i}`, due_at: '2030-01-01T10:00:00Z' })).json()
          .task_id,
      );
    // Nothing moves them yet: none is readable, and the outbox gauge counts the five tasks holding them.
    expect(await feedEvents(quiet.app, own.key)).toEqual([]);
    await waitFor(async () => (await outboxBacklog(quiet.app)).tasks === 5); // this app's five (the other app's moved)
    const queue = new Queue<EventJobData>('automations', {
      connection: quiet.redis,
      prefix: quiet.config.QUEUE_PREFIX,
    });
    const relay = await startTestWorkers(quiet.config, quiet.db, ['relay']);
    try {
      // Moved: each is in the feed once, with its own place, and the outboxes are cleared (the gauge falls to 0).
      const feed = await waitForFeed(quiet.app, own.key, '', 5);
      expect(feed.map((event) => event.data.task_id).sort()).toEqual([...ids].sort());
      expect(new Set(feed.map((event) => event.sequence)).size).toBe(5);
      await waitFor(async () => (await outboxBacklog(quiet.app)).tasks === 0);
      // The sequencer publishes them, in batch jobs, each event with its place in the feed.
      const queued = async () => (await queue.getJobs(['waiting'])).flatMap((job) => eventsOfJob(job.data));
      const events = await waitFor(async () => ((await queued()).length >= 5 ? queued() : undefined));
      expect(events!.map((event) => event.data.task_id).sort()).toEqual([...ids].sort());
      expect(new Set(events!.map((event) => event.sequence)).size).toBe(5);
    } finally {
      await relay.close();
      await queue.close();
      await quiet.close();
    }
  });

  it('clearing published events keeps events that arrived after they were read', async () => {
    const quiet = await buildTestApp({}, {}); // no fast path: only the relay started below moves outboxes
    const own = await createTenant(quiet.app);
    const tasks = quiet.db.collection('tasks');
    const event = (taskId: string) => buildEvent('task.updated', own.companyId, taskData({ task_id: taskId }));
    const [e1, e2] = [event('clear-exact'), event('clear-exact')];
    const [e3, e4] = [event('clear-newer'), event('clear-newer')];
    // Setup: outboxes as a publisher finds them; no request can stop a publisher between its read and its clear.
    await tasks.insertMany([
      { _id: 'clear-exact' as never, company_id: own.companyId, pending_events: [e1, e2], outbox_pending: true },
      {
        _id: 'clear-newer' as never,
        company_id: own.companyId,
        pending_events: [e3, e4],
        outbox_pending: true,
        outbox_bytes: 20,
      },
    ]);
    await clearPublished(tasks, [
      { documentId: 'clear-exact', companyId: own.companyId, eventIds: [e1.event_id, e2.event_id], bytes: 20 },
      { documentId: 'clear-newer', companyId: own.companyId, eventIds: [e3.event_id], bytes: 10 }, // e4 was recorded after the publisher read the document
    ]);
    const relay = await startTestWorkers(quiet.config, quiet.db, ['relay']);
    try {
      // The relay moves whatever the clearing kept, until no outbox holds anything.
      await waitFor(async () => (await outboxBacklog(quiet.app)).tasks === 0);
      // A write after those moves: once it is readable, so is everything they recorded (the feed never shows an
      // event behind one it has shown). e4 alone came before it: not lost, and what was taken as published is
      // not moved again.
      const marker = await createTask(quiet.app, own);
      const feed = await waitFor(async () => {
        const found = await feedEvents(quiet.app, own.key);
        return found.some((shown) => shown.data.task_id === marker.task_id) ? found : undefined;
      });
      expect(feed!.map((shown) => (shown.data.task_id === marker.task_id ? 'marker' : shown.event_id))).toEqual([
        e4.event_id,
        'marker',
      ]);
    } finally {
      await relay.close();
      await quiet.close();
    }
  });

  it('publishing the same events again adds nothing: one job per event and queue, with the event id as job id', async () => {
    const producer = createEventProducer({ connection: t.redis, prefix: t.config.QUEUE_PREFIX });
    try {
      const events = [
        buildEvent('task.created', tenant.companyId, { task_id: 'tsk_republished' }),
        buildEvent('task.completed', tenant.companyId, { task_id: 'tsk_republished' }),
      ];
      const all = events.map((event) => ({ event, consumers: EVENT_QUEUES }));
      await publishEvents(producer, all);
      await publishEvents(producer, all, { republished: true });
      for (const queue of [automationsQueue, fanoutQueue]) {
        const queued = (await queue.getJobs(['waiting'])).filter(
          (job) => !isEventBatch(job.data) && job.data.data.task_id === 'tsk_republished',
        );
        expect(queued.map((job) => job.id).sort()).toEqual(events.map((event) => event.event_id).sort());
        expect(queued.every((job) => job.opts.attempts === 5 && job.opts.removeOnComplete !== undefined)).toBe(true);
      }
    } finally {
      await producer.close();
    }
  });
});
