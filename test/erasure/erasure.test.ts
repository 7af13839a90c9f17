import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EJSON } from 'bson';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/contracts/jobs.js';
import { COLLECTIONS } from '../../src/erasure/collections.js';
import { runErasure } from '../../src/erasure/job.js';
import { closeQueues, createQueues } from '../../src/shared/queues.js';
import { type Queues } from '../../src/shared/queues.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { admin, createItem, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from '../hooks/receiver.js';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
let receiver: Receiver;
let workers: Awaited<ReturnType<typeof startTestWorkers>>;
let queues: Queues;

/** Values only the erased item ever held: none may remain anywhere afterwards. */
const DISTINCT = ['Zebracorn Quillfeather', 'Xylophage-Marmalade-42', 'ext-Vermilion-Osprey', 'Second-Distinct-Value'];
const KEPT = 'Keep-Me-Intact-Value';

beforeAll(async () => {
  // A failed delivery keeps its envelope; the first retry would come long after this file ends.
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000', HOOK_BACKOFF_MS: '600000' }, { publisher: true });
  tenant = await createTenant(t.app);
  other = await createTenant(t.app);
  // The receiver echoes what it got, so the delivery record's response_body holds the record's values too.
  receiver = await Receiver.start((request) => ({ status: 500, body: request.body }));
  workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks', 'erasures']);
  queues = createQueues(QUEUE_NAMES, { connection: t.redis, prefix: t.config.QUEUE_PREFIX });
});
afterAll(async () => {
  if (queues) await closeQueues(queues);
  await workers?.close();
  await receiver?.close();
  await t?.close();
});

/** Every document of every collection of the test database, as extended JSON text. */
async function everyDocument(): Promise<Array<{ collection: string; text: string }>> {
  const found: Array<{ collection: string; text: string }> = [];
  for (const { name } of await t.db.listCollections().toArray()) {
    for (const doc of await t.db.collection(name).find({}).toArray())
      found.push({ collection: name, text: EJSON.stringify(doc) });
  }
  return found;
}

/** The data of every BullMQ job this file's queues keep in Redis (done and failed jobs are kept a while). */
async function everyJobInRedis(): Promise<string[]> {
  const found: string[] = [];
  for (const key of await t.redis.keys(`${t.config.QUEUE_PREFIX}:*`)) {
    if ((await t.redis.type(key)) !== 'hash') continue;
    const data = await t.redis.hget(key, 'data');
    if (data) found.push(`${key} ${data}`);
  }
  return found;
}

const erasureOf = async (companyId: string, erasureId: string) =>
  (await admin(t.app, 'GET', `/companies/${companyId}/erasures/${erasureId}`, undefined, 200)).json();

describe('POST /v1/admin/companies/{company_id}/erasures', () => {
  it('erases the item everywhere: a scan of every collection finds none of its values; events keep their place', async () => {
    const hook = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: receiver.url(), event: '*' });
    expect(hook.statusCode, hook.body).toBe(201);
    const created = await ext(
      t.app,
      tenant.key,
      'POST',
      '/items',
      {
        name: 'Zebracorn Quillfeather',
        pipeline_id: tenant.pipelineId,
        stage_id: tenant.stageIds[0],
        external_id: 'ext-Vermilion-Osprey',
        metadata: { notes_text: 'Xylophage-Marmalade-42' },
      },
      { 'idempotency-key': 'erase-me-create' },
    );
    expect(created.statusCode, created.body).toBe(201);
    const item = created.json();
    const patched = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, {
      metadata: { notes_text: 'Second-Distinct-Value' },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    const task = await createTask(t.app, tenant, { title: 'Linked task', item_id: item.item_id });
    const kept = await createItem(t.app, tenant, { name: KEPT, metadata: { notes_text: KEPT } });
    // Everything has landed: history rows, both deliveries (with the envelope and the echo) of the item's events.
    await waitFor(
      async () => (await t.db.collection('record_history').countDocuments({ resource_id: item.item_id })) === 2,
    );
    await waitFor(
      async () => (await t.db.collection('deliveries').countDocuments({ event_id: { $exists: true } })) >= 4,
    );
    const before = await everyDocument();
    for (const value of DISTINCT) {
      const holders = new Set(before.filter((doc) => doc.text.includes(value)).map((doc) => doc.collection));
      expect(holders.size, value).toBeGreaterThan(0);
    }
    const holdersBefore = new Set(
      before.filter((doc) => DISTINCT.some((v) => doc.text.includes(v))).map((d) => d.collection),
    );
    expect([...holdersBefore].sort()).toEqual(
      expect.arrayContaining(['deliveries', 'events', 'idempotency_keys', 'items', 'record_history']),
    );
    // The event jobs that carried them, and the retry of the failing delivery, are kept in Redis too.
    const jobsHolding = async () => (await everyJobInRedis()).filter((job) => DISTINCT.some((v) => job.includes(v)));
    expect((await jobsHolding()).length).toBeGreaterThan(0);

    const requested = await admin(
      t.app,
      'POST',
      `/companies/${tenant.companyId}/erasures`,
      { item_id: item.item_id },
      202,
    );
    const erasure = requested.json();
    expect(erasure).toMatchObject({
      erasure_id: expect.any(String),
      status: 'queued',
      item_id: item.item_id,
      task_id: null,
    });
    const done = await waitFor(async () => {
      const state = await erasureOf(tenant.companyId, erasure.erasure_id);
      return state.status === 'completed' ? state : undefined;
    }, 20_000);
    expect(done.completed_at).toEqual(expect.any(String));

    const after = await everyDocument();
    const left = after.filter((doc) => DISTINCT.some((value) => doc.text.includes(value)));
    expect(left).toEqual([]);
    expect(await jobsHolding()).toEqual([]);
    // What was not erased is intact.
    expect(after.some((doc) => doc.collection === 'items' && doc.text.includes(KEPT))).toBe(true);
    expect((await ext(t.app, tenant.key, 'GET', `/tasks/${task.task_id}`)).json()).toMatchObject({
      item_id: item.item_id,
    });
    expect((await ext(t.app, tenant.key, 'GET', `/items/${kept.item_id}/history`)).json()).toHaveLength(1);

    // The record is gone for every read; its events keep their place in the feed, marked erased.
    expectProblem(await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}`), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}/history`), 404, 'not_found');
    const exported = await ext(t.app, tenant.key, 'GET', '/export/items');
    expect(exported.body).not.toContain(item.item_id);
    const events = (await ext(t.app, tenant.key, 'GET', `/events?resource_id=${item.item_id}`)).json();
    expect(events.map((event: { type: string }) => event.type)).toEqual(['item.created', 'item.updated']);
    for (const event of events) {
      expect(event).toMatchObject({
        erased: true,
        data: {},
        event_id: expect.any(String),
        sequence: expect.any(Number),
      });
      expect(event).not.toHaveProperty('changes');
    }
    // A second request for the same record: it is gone.
    expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/erasures`, { item_id: item.item_id }),
      404,
      'not_found',
    );
  });

  it('erases a task the same way, also one deleted (archived) before', async () => {
    const task = await createTask(t.app, tenant, { title: 'Quokka-Saffron-Task', notes: 'Quokka notes' });
    expect((await ext(t.app, tenant.key, 'DELETE', `/tasks/${task.task_id}`)).statusCode).toBe(204);
    await waitFor(
      async () => (await t.db.collection('record_history').countDocuments({ resource_id: task.task_id })) === 2,
    );
    const erasure = (
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/erasures`, { task_id: task.task_id }, 202)
    ).json();
    expect(erasure).toMatchObject({ task_id: task.task_id, item_id: null });
    await waitFor(async () => (await erasureOf(tenant.companyId, erasure.erasure_id)).status === 'completed', 20_000);
    expect((await everyDocument()).filter((doc) => doc.text.includes('Quokka'))).toEqual([]);
  });

  it("answers 404 for an unknown record, another company's record and an unknown erasure; 400 for a bad body", async () => {
    const mine = await createItem(t.app, tenant, { name: 'Not theirs' });
    expectProblem(
      await admin(t.app, 'POST', `/companies/${other.companyId}/erasures`, { item_id: mine.item_id }),
      404,
      'not_found',
    );
    expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/erasures`, {
        item_id: 'itm_000000000000000000000000',
      }),
      404,
      'not_found',
    );
    expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/erasures`, {
        task_id: 'tsk_000000000000000000000000',
      }),
      404,
      'not_found',
    );
    expectProblem(await admin(t.app, 'POST', `/companies/${tenant.companyId}/erasures`, {}), 400, 'validation_failed');
    expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/erasures`, { item_id: mine.item_id, task_id: 'x' }),
      400,
      'validation_failed',
    );
    expectProblem(
      await admin(t.app, 'GET', `/companies/${tenant.companyId}/erasures/era_000000000000000000000000`),
      404,
      'not_found',
    );
    expect((await ext(t.app, tenant.key, 'GET', `/items/${mine.item_id}`)).statusCode).toBe(200);
  });
});

describe('the erasure job', () => {
  it('finishes on a rerun after its worker died halfway, reports completed once, and does nothing when run again', async () => {
    const company = await createTenant(t.app);
    const item = await createItem(t.app, company, { name: 'Halfway-Heron-Value' });
    await waitFor(
      async () => (await t.db.collection('record_history').countDocuments({ resource_id: item.item_id })) === 1,
    );
    // Recorded without a job, so only this test runs it.
    const repos = t.app.repos;
    const now = new Date();
    await repos.erasures.insert({
      _id: 'era_halfway',
      company_id: company.companyId,
      kind: 'item',
      record_id: item.item_id,
      status: 'queued',
      steps_done: [],
      runs: 0,
      requested_at: now,
      started_at: null,
      completed_at: null,
    });
    const deps = { repos, queues, logger: pino({ level: 'silent' }), settleMs: 0 };
    const died = new Error('worker died');
    await expect(
      runErasure(
        {
          ...deps,
          afterStep: (collection) => {
            if (collection === 'record_history') throw died;
          },
        },
        company.companyId,
        'era_halfway',
      ),
    ).rejects.toBe(died);
    const halfway = await erasureOf(company.companyId, 'era_halfway');
    expect(halfway.status).toBe('running');
    // Half done: the history is gone, the item itself is still there.
    expect(await t.db.collection('record_history').countDocuments({ resource_id: item.item_id })).toBe(0);
    expect(await t.db.collection('items').countDocuments({ _id: item.item_id as never })).toBe(1);

    expect(await runErasure(deps, company.companyId, 'era_halfway')).toBe('completed');
    const completed = await erasureOf(company.companyId, 'era_halfway');
    expect(completed.status).toBe('completed');
    expect(await runErasure(deps, company.companyId, 'era_halfway')).toBe('already completed');
    expect(await erasureOf(company.companyId, 'era_halfway')).toEqual(completed);
    expect((await everyDocument()).filter((doc) => doc.text.includes('Halfway-Heron-Value'))).toEqual([]);
    expect(await runErasure(deps, company.companyId, 'era_unknown')).toBe('unknown');
  });
});

describe('the list of collections next to the erasure job', () => {
  const root = join(import.meta.dirname, '../..');
  const sources = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return name === 'dev' ? [] : sources(path);
      return path.endsWith('.ts') ? [path] : [];
    });

  it('names every collection the product code opens', () => {
    const named = new Set<string>();
    for (const file of [...sources(join(root, 'src')), ...sources(join(root, 'workers'))]) {
      const text = readFileSync(file, 'utf8');
      for (const [, name] of text.matchAll(/\.collection(?:<[^>]*>)?\(\s*'([a-z_]+)'/g)) named.add(name!);
    }
    expect(named.size).toBeGreaterThan(10);
    expect([...named].filter((name) => !(name in COLLECTIONS))).toEqual([]);
  });

  it('names every collection the running product has created', async () => {
    const names = (await t.db.listCollections().toArray()).map((collection) => collection.name);
    expect(names).toEqual(
      expect.arrayContaining(['items', 'tasks', 'events', 'record_history', 'deliveries', 'erasures']),
    );
    expect(names.filter((name) => !(name in COLLECTIONS))).toEqual([]);
  });
});
