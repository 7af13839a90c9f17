import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { buildEvent, type EventEnvelope } from '../../src/contracts/envelope.js';
import { EventsRepository } from '../../src/events/repository.js';
import { SequencerStore } from '../../src/events/sequencer-store.js';
import { ensureIndexes } from '../../src/repositories.js';
import { newId } from '../../src/shared/ids.js';
import { connectMongo } from '../../src/shared/mongo.js';
import { outboxOnInsert } from '../../src/shared/outbox.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { scanOverdueTasks } from '../../src/tasks/overdue.js';
import { createTestEnv, startTestWorkers, type TestEnv } from '../helpers/app.js';
import { taskData } from '../helpers/events.js';
import { admin, createKey, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { NetworkLink } from '../helpers/network-link.js';
import { killHard, spawnWorker } from '../helpers/processes.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { Receiver } from '../hooks/receiver.js';
import type { Db } from 'mongodb';

const silent = pino({ level: 'silent' });
type FeedEvent = EventEnvelope & { sequence: number };

/** A web process: its own Redis connection, its own publisher (with a sequencer candidate) and app. */
async function webProcess(env: TestEnv, options: { sequencer?: boolean; db?: Db } = {}) {
  const db = options.db ?? env.db;
  const redis = createRequestPathRedis(env.config.REDIS_URL, { commandTimeout: 10_000 });
  redis.on('error', () => {});
  await waitFor(() => redis.status === 'ready');
  const publisher = createEventPublisher(db, { connection: redis, prefix: env.config.QUEUE_PREFIX }, silent, {
    sequencer: options.sequencer ?? true,
    sequencerLeaseMs: env.config.SEQUENCER_LEASE_MS,
  });
  const app: App = await buildApp({ config: env.config, db, redis, publisher, logger: silent });
  await app.ready();
  return {
    app,
    publisher,
    async close() {
      await app.close();
      await publisher.close();
      redis.disconnect();
    },
  };
}
type Web = Awaited<ReturnType<typeof webProcess>>;

/**
 * A client tailing the feed from the start with `wait`, as an integrator would, until `done` says it has
 * seen enough. A 503 (MongoDB away) is retried from the same cursor.
 */
async function tail(app: App, key: string, done: (seen: FeedEvent[]) => boolean, timeoutMs = 90_000) {
  const seen: FeedEvent[] = [];
  let cursor: string | undefined;
  const deadline = Date.now() + timeoutMs;
  while (!done(seen)) {
    if (Date.now() > deadline) throw new Error(`tail: ${seen.length} events after ${timeoutMs} ms`);
    const url = `/events?limit=200&wait=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const response = await ext(app, key, 'GET', url);
    if (response.statusCode === 503) {
      await sleep(200);
      continue;
    }
    expect(response.statusCode, response.body).toBe(200);
    cursor = response.headers['x-next-cursor'] as string;
    expect(cursor).toBeTruthy();
    seen.push(...response.json<FeedEvent[]>());
  }
  return seen;
}

/** Every expected event exactly once, and sequences that only go up. */
function expectExactlyOnceInOrder(seen: FeedEvent[], expectedIds: Iterable<string>) {
  const ids = seen.map((event) => event.event_id);
  expect(new Set(ids).size).toBe(ids.length);
  expect(new Set(ids)).toEqual(new Set(expectedIds));
  for (let i = 1; i < seen.length; i++) expect(seen[i]!.sequence).toBeGreaterThan(seen[i - 1]!.sequence);
}

const eventIdsOf = async (env: TestEnv, companyId: string) =>
  (await env.db.collection('events').find({ company_id: companyId }).project({ _id: 1 }).toArray()).map((doc) =>
    String(doc._id),
  );

describe('the change feed', () => {
  let env: TestEnv;
  let web: Web;
  let tenant: Tenant;

  beforeAll(async () => {
    env = await createTestEnv({ RATE_LIMIT_MAX: '1000000' });
    await ensureIndexes(env.db);
    web = await webProcess(env);
    tenant = await createTenant(web.app);
  });
  afterAll(async () => {
    await web?.close();
    await env?.close();
  });

  it('answers bad input with 400 naming the parameter', async () => {
    const other = await createTenant(web.app);
    const page = await ext(web.app, tenant.key, 'GET', '/events?limit=1');
    const cursor = encodeURIComponent(page.headers['x-next-cursor'] as string);
    const cases: Array<[string, string]> = [
      [`/events?after=3&cursor=${cursor}`, 'after'],
      ['/events?after=x', 'after'],
      ['/events?after=-1', 'after'],
      ['/events?after=1.5', 'after'],
      ['/events?wait=31', 'wait'],
      ['/events?wait=-1', 'wait'],
      ['/events?wait=soon', 'wait'],
      [`/events?exclude_actor=${other.keyId}`, 'exclude_actor'],
      ['/events?exclude_actor=key_000000000000000000000000', 'exclude_actor'],
    ];
    for (const [url, path] of cases) {
      const body = expectProblem(await ext(web.app, tenant.key, 'GET', url), 400, 'validation_failed');
      expect(
        body.errors.map((error: { path: string }) => error.path),
        url,
      ).toContain(path);
    }
  });

  it('every answer carries a cursor, the last and an empty one too; after= starts past a sequence', async () => {
    const own = await createTenant(web.app);
    const empty = await ext(web.app, own.key, 'GET', '/events');
    expect(empty.json()).toEqual([]);
    const start = empty.headers['x-next-cursor'] as string;
    expect(start).toBeTruthy();
    expect(empty.headers.link).toContain('rel="next"');
    for (let i = 0; i < 3; i++) await createTask(web.app, own, { title: `t${i}` });
    const all = await tail(web.app, own.key, (seen) => seen.length >= 3);
    expect(all.map((event) => event.sequence)).toEqual([1, 2, 3]);
    // Resuming from the empty answer's cursor brings exactly those three, then an empty page at the end.
    const resumed = await ext(web.app, own.key, 'GET', `/events?cursor=${encodeURIComponent(start)}`);
    expect(resumed.json<FeedEvent[]>().map((event) => event.sequence)).toEqual([1, 2, 3]);
    const end = await ext(
      web.app,
      own.key,
      'GET',
      `/events?cursor=${encodeURIComponent(resumed.headers['x-next-cursor'] as string)}`,
    );
    expect(end.json()).toEqual([]);
    expect(end.headers['x-next-cursor']).toBeTruthy();
    const after = await ext(web.app, own.key, 'GET', '/events?after=1');
    expect(after.json<FeedEvent[]>().map((event) => event.sequence)).toEqual([2, 3]);
    expect(after.headers.link).not.toContain('after=');
  });

  it('a waiting request is answered as soon as an event becomes readable, and empty after its wait', async () => {
    const own = await createTenant(web.app);
    const startedAt = Date.now();
    const idle = await ext(web.app, own.key, 'GET', '/events?wait=1');
    expect(idle.json()).toEqual([]);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(900);
    const cursor = encodeURIComponent(idle.headers['x-next-cursor'] as string);
    const waiting = ext(web.app, own.key, 'GET', `/events?wait=30&cursor=${cursor}`);
    await sleep(300);
    const task = await createTask(web.app, own, { title: 'wake up' });
    const answered = await waiting;
    expect(answered.json<FeedEvent[]>().map((event) => event.data.task_id)).toEqual([task.task_id]);
  });

  it('carries the API key as actor; exclude_actor leaves out a key\u2019s own echo', async () => {
    const own = await createTenant(web.app);
    const sync = await createKey(web.app, own.companyId, own.userId, ['tasks:read', 'tasks:write', 'items:read']);
    await createTask(web.app, own, { title: 'by the main key' });
    const mine = await ext(web.app, sync.key, 'POST', '/tasks', {
      title: 'by the sync',
      due_at: '2030-01-01T00:00:00Z',
    });
    expect(mine.statusCode).toBe(201);
    const seen = await tail(web.app, own.key, (events) => events.length >= 2);
    expect(seen.map((event) => event.actor)).toEqual([
      { type: 'api_key', id: own.keyId },
      { type: 'api_key', id: sync.key_id },
    ]);
    const withoutEcho = await ext(web.app, sync.key, 'GET', `/events?exclude_actor=${sync.key_id}`);
    expect(withoutEcho.json<FeedEvent[]>().map((event) => event.data.title)).toEqual(['by the main key']);
  });
});

describe('actors and echo', () => {
  let env: TestEnv;
  let web: Web;
  let workers: Awaited<ReturnType<typeof startTestWorkers>>;
  let inbox: Receiver;

  beforeAll(async () => {
    env = await createTestEnv({ RATE_LIMIT_MAX: '1000000' });
    await ensureIndexes(env.db);
    web = await webProcess(env);
    workers = await startTestWorkers(env.config, env.db, ['automations', 'hooks', 'relay']);
    inbox = await Receiver.start();
  });
  afterAll(async () => {
    await inbox?.close();
    await workers?.close();
    await web?.close();
    await env?.close();
  });

  it("an automation's follow-up carries the automation as actor; task.overdue carries time", async () => {
    const tenant = await createTenant(web.app);
    const rule = (
      await admin(
        web.app,
        'POST',
        `/companies/${tenant.companyId}/automations`,
        {
          name: 'follow up',
          trigger: 'task.created',
          conditions: { task_type: 'call' },
          actions: [{ type: 'create_task', title: 'Follow up', due_in_minutes: 5 }],
        },
        201,
      )
    ).json();
    await createTask(web.app, tenant, { title: 'Call', task_type: 'call' });
    const created = await tail(web.app, tenant.key, (events) => events.length >= 2);
    expect(created.map((event) => [event.data.title, event.actor])).toEqual([
      ['Call', { type: 'api_key', id: tenant.keyId }],
      ['Follow up', { type: 'automation', id: rule.automation_id }],
    ]);
    await scanOverdueTasks(
      { tasks: web.app.repos.tasks, publisher: web.publisher, logger: silent },
      new Date(Date.now() + 3_600_000),
    );
    const overdue = await waitFor(async () => {
      const events = (await ext(web.app, tenant.key, 'GET', '/events?type=task.overdue')).json<FeedEvent[]>();
      return events.length === 2 ? events : undefined;
    });
    expect(overdue!.map((event) => event.actor)).toEqual([{ type: 'system' }, { type: 'system' }]);
  });

  it("a hook's filter.exclude_actors leaves out the events its keys caused; a foreign key is refused", async () => {
    const tenant = await createTenant(web.app);
    const other = await createTenant(web.app);
    const sync = await createKey(web.app, tenant.companyId, tenant.userId, ['tasks:read', 'tasks:write']);
    const refused = await ext(web.app, tenant.key, 'POST', '/hooks', {
      target_url: inbox.url('/foreign'),
      events: ['task.created'],
      filter: { exclude_actors: [other.keyId] },
    });
    expect(expectProblem(refused, 400, 'validation_failed').errors[0].path).toBe('filter.exclude_actors.0');
    const hook = await ext(web.app, tenant.key, 'POST', '/hooks', {
      target_url: inbox.url('/echo'),
      events: ['task.created'],
      filter: { exclude_actors: [sync.key_id] },
    });
    expect(hook.statusCode, hook.body).toBe(201);
    expect(hook.json().filter).toEqual({ exclude_actors: [sync.key_id] });
    const echo = await ext(web.app, sync.key, 'POST', '/tasks', {
      title: 'from the sync',
      due_at: '2030-01-01T00:00:00Z',
    });
    expect(echo.statusCode).toBe(201);
    await createTask(web.app, tenant, { title: 'from the main key' });
    // Both events are readable; the later one reaching the hook shows the earlier one was left out.
    await tail(web.app, tenant.key, (events) => events.length >= 2);
    const delivered = await waitFor(() => {
      const bodies = inbox.requests.filter((request) => request.body.includes(tenant.companyId));
      return bodies.length >= 1 ? bodies : undefined;
    });
    await sleep(300);
    expect(delivered!.map((request) => JSON.parse(request.body).data.title)).toEqual(['from the main key']);
  });
});

describe('faults: a client tailing the feed from the start sees every event exactly once, in sequence order', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv({ RATE_LIMIT_MAX: '1000000', SEQUENCER_LEASE_MS: '1000' });
    await ensureIndexes(env.db);
  });
  afterAll(async () => env?.close());

  it('two web processes taking task creates at once from 16 concurrent writers', async () => {
    const one = await webProcess(env);
    const two = await webProcess(env);
    try {
      const tenant = await createTenant(one.app);
      const writes = 400;
      let written = 0;
      const writers = Array.from({ length: 16 }, async (_, writer) => {
        while (written < writes) {
          written++;
          await createTask(writer % 2 ? two.app : one.app, tenant, { title: `w${writer}` });
        }
      });
      const seen = await tail(one.app, tenant.key, (events) => events.length >= writes);
      await Promise.all(writers);
      expectExactlyOnceInOrder(seen, await eventIdsOf(env, tenant.companyId));
    } finally {
      await one.close();
      await two.close();
    }
  }, 120_000);

  it('a web process that died between its write and its move: its events come later, still exactly once', async () => {
    const web = await webProcess(env);
    try {
      const tenant = await createTenant(web.app);
      const tailing = tail(web.app, tenant.key, (events) => events.length >= 40);
      for (let i = 0; i < 15; i++) await createTask(web.app, tenant, { title: `before ${i}` });
      const readable = async () =>
        ((await env.db.collection('event_sequences').findOne({ _id: tenant.companyId as never }))
          ?.readable as number) ?? 0;
      expect(await waitFor(async () => (await readable()) >= 15)).toBe(true);
      // What a web process SIGKILLed after its write leaves behind: the change with its events in the outbox.
      const orphans = Array.from({ length: 10 }, () => {
        const id = newId('task');
        return { id, events: [buildEvent('task.created', tenant.companyId, taskData({ task_id: id }))] };
      });
      for (const { id, events } of orphans)
        await env.db
          .collection('tasks')
          .insertOne({ _id: id as never, company_id: tenant.companyId, ...outboxOnInsert(events) });
      for (let i = 0; i < 15; i++) await createTask(web.app, tenant, { title: `after ${i}` });
      const relay = await startTestWorkers(env.config, env.db, ['relay']);
      try {
        const seen = await tailing;
        expectExactlyOnceInOrder(seen, await eventIdsOf(env, tenant.companyId));
        // Recorded late, they come after everything readable when they were: the 15 events before them.
        const orphanIds = new Set(orphans.map(({ events }) => events[0]!.event_id));
        expect(seen.findIndex((event) => orphanIds.has(event.event_id))).toBeGreaterThanOrEqual(15);
      } finally {
        await relay.close();
      }
    } finally {
      await web.close();
    }
  }, 120_000);

  it('a sequencer that died mid-batch: nothing of its batch is readable until the next holder finishes it', async () => {
    const web = await webProcess(env, { sequencer: false });
    const store = new SequencerStore(env.db);
    const events = new EventsRepository(env.db);
    try {
      const tenant = await createTenant(web.app);
      for (let i = 0; i < 6; i++) await createTask(web.app, tenant, { title: `t${i}` });
      await web.publisher.settled();
      // A holder that reserved, recorded its plan and wrote half the sequences, then was SIGKILLed.
      const held = (await waitFor(() => store.acquire('dead', 1_000), 10_000))!;
      const unsequenced = await events.findUnsequenced(100);
      expect(unsequenced).toHaveLength(6);
      const last = await store.reserve(tenant.companyId, 6);
      const plan = {
        events: unsequenced.map((doc, index) => ({
          event_id: doc._id,
          company_id: tenant.companyId,
          sequence: last - 5 + index,
        })),
        readable: [{ company_id: tenant.companyId, sequence: last }],
      };
      expect(await store.recordPlan(held.epoch, plan)).toBe(true);
      await events.assignSequences(
        plan.events.slice(0, 3).map((planned) => ({ event: planned, sequence: planned.sequence })),
        false,
      );
      // Written but not readable: the feed serves nothing above the readable position.
      expect((await ext(web.app, tenant.key, 'GET', '/events')).json()).toEqual([]);

      // Another process's sequencer waits out the lease, then finishes the plan with the same sequences.
      const next = await webProcess(env);
      try {
        const seen = await tail(web.app, tenant.key, (found) => found.length >= 6);
        expectExactlyOnceInOrder(seen, await eventIdsOf(env, tenant.companyId));
        expect(new Map(seen.map((event) => [event.event_id, event.sequence]))).toEqual(
          new Map(plan.events.map((planned) => [planned.event_id, planned.sequence])),
        );
        // The dead holder's epoch can no longer record a plan.
        expect(await store.recordPlan(held.epoch, null)).toBe(false);
      } finally {
        await next.close();
      }
    } finally {
      await web.close();
    }
  }, 60_000);

  it("the sequencer's process SIGKILLed while events flow: another takes over, nothing skipped or repeated", async () => {
    const web = await webProcess(env, { sequencer: false });
    const worker = await spawnWorker(env.config, { WORKERS: 'relay', SEQUENCER_LEASE_MS: '1000' });
    let backup: Web | undefined;
    try {
      const tenant = await createTenant(web.app);
      // The worker process holds the lease.
      await waitFor(async () => {
        const lease = await env.db.collection('event_sequencer').findOne({});
        return lease && (lease.expires_at as Date).getTime() > Date.now();
      }, 30_000);
      const tailing = tail(web.app, tenant.key, (events) => events.length >= 120);
      for (let i = 0; i < 60; i++) await createTask(web.app, tenant, { title: `before ${i}` });
      await killHard(worker);
      backup = await webProcess(env); // its sequencer takes over once the dead one's lease ran out
      for (let i = 0; i < 60; i++) await createTask(web.app, tenant, { title: `after ${i}` });
      const seen = await tailing;
      expectExactlyOnceInOrder(seen, await eventIdsOf(env, tenant.companyId));
    } finally {
      await killHard(worker);
      await backup?.close();
      await web.close();
    }
  }, 120_000);

  it('Redis losing its data changes nothing for the feed', async () => {
    const web = await webProcess(env);
    try {
      const tenant = await createTenant(web.app);
      const tailing = tail(web.app, tenant.key, (events) => events.length >= 60);
      for (let i = 0; i < 30; i++) await createTask(web.app, tenant, { title: `before ${i}` });
      await env.redis.flushall();
      for (let i = 0; i < 30; i++) await createTask(web.app, tenant, { title: `after ${i}` });
      expectExactlyOnceInOrder(await tailing, await eventIdsOf(env, tenant.companyId));
    } finally {
      await web.close();
    }
  }, 60_000);

  it('MongoDB unreachable for 10 s while writes go on: the feed resumes where it was', async () => {
    const target = new URL(inject('mongoUrl'));
    const link = await new NetworkLink(target.hostname, Number(target.port)).start();
    const mongo = await connectMongo(`mongodb://127.0.0.1:${link.port}/?directConnection=true`, env.config.MONGO_DB);
    // The web process and a worker running the relay, both reaching MongoDB through the link.
    const web = await webProcess(env, { db: mongo.db });
    const worker = await startTestWorkers(env.config, mongo.db, ['relay']);
    try {
      const tenant = await createTenant(web.app);
      let expected = Number.POSITIVE_INFINITY;
      const tailing = tail(web.app, tenant.key, (events) => events.length >= expected);
      const write = async (title: string) =>
        (await ext(web.app, tenant.key, 'POST', '/tasks', { title, due_at: '2026-11-22T09:30:00Z' })).statusCode;
      for (let i = 0; i < 20; i++) expect(await write(`before ${i}`)).toBe(201);
      await link.cut();
      const outageEnds = Date.now() + 10_000;
      const during: number[] = [];
      while (Date.now() < outageEnds) {
        during.push(await write('during'));
        await sleep(250);
      }
      expect(during.length).toBeGreaterThan(1);
      expect(during.every((status) => status === 503)).toBe(true);
      await link.restore();
      const after = Array.from({ length: 20 }, (_, i) => `after ${i}`);
      for (const title of after) expect(await waitFor(async () => (await write(title)) === 201, 30_000)).toBe(true);
      // A write answered 503 may still have been applied; every stored task must have its event once.
      expected = await env.db.collection('tasks').countDocuments({ company_id: tenant.companyId });
      expect(expected).toBeGreaterThanOrEqual(40);
      expectExactlyOnceInOrder(await tailing, await eventIdsOf(env, tenant.companyId));
    } finally {
      await worker.close();
      await web.close();
      await mongo.client.close();
      await link.close();
    }
  }, 120_000);
});
