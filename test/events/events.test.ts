import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import { EVENT_BATCH_JOB, EVENT_QUEUES, isEventBatch, type EventJobData } from '../../src/contracts/jobs.js';
import { publishEvents } from '../../src/events/queue-publisher.js';
import { clearPublished } from '../../src/shared/outbox.js';
import { createEventProducer } from '../../src/shared/queues.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { eventsOfJob } from '../helpers/events.js';
import { createItem, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
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

async function settle(collection: string, id: string) {
  // The fast path clears the outbox once Redis accepted the events.
  await waitFor(async () => !(await t.db.collection(collection).findOne({ _id: id as never }))?.outbox_pending, 5_000);
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
    await settle('tasks', id);
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
    const stored = await t.db.collection('tasks').findOne({ _id: id });
    expect(stored?.pending_events ?? []).toEqual([]);
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
    for (const id of ids) await settle('tasks', id);
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
    await settle('items', item.item_id);
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
    expect(await quiet.db.collection('tasks').countDocuments({ outbox_pending: true })).toBe(5);
    const queue = new Queue<EventJobData>('automations', {
      connection: quiet.redis,
      prefix: quiet.config.QUEUE_PREFIX,
    });
    const relay = await startTestWorkers(quiet.config, quiet.db, ['relay']);
    try {
      // The outbox clears once the events are recorded; the queue may get them a moment later.
      await waitFor(async () => (await quiet.db.collection('tasks').countDocuments({ outbox_pending: true })) === 0);
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
    const tasks = t.db.collection('tasks');
    const event = (id: string) => ({ event_id: id, type: 'task.updated' });
    await tasks.insertMany([
      {
        _id: 'clear-exact' as never,
        company_id: 'c1',
        pending_events: [event('e1'), event('e2')],
        outbox_pending: true,
      },
      {
        _id: 'clear-newer' as never,
        company_id: 'c1',
        pending_events: [event('e3'), event('e4')],
        outbox_pending: true,
        outbox_bytes: 20,
      },
    ]);
    await clearPublished(tasks, [
      { documentId: 'clear-exact', companyId: 'c1', eventIds: ['e1', 'e2'], bytes: 20 },
      { documentId: 'clear-newer', companyId: 'c1', eventIds: ['e3'], bytes: 10 }, // e4 was recorded after the publisher read the document
    ]);
    const exact = await tasks.findOne({ _id: 'clear-exact' as never });
    expect(exact).toEqual({ _id: 'clear-exact', company_id: 'c1' });
    const newer = await tasks.findOne({ _id: 'clear-newer' as never });
    expect(newer).toEqual({
      _id: 'clear-newer',
      company_id: 'c1',
      pending_events: [event('e4')],
      outbox_pending: true,
      outbox_bytes: 10,
    });
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
