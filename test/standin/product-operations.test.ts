// Every operation shape the product issues (read from src/*/repository.ts and src/events/*), checked through the
// official driver. Set MONGO_URL to run the very same file against a real MongoDB 7 (unique databases, dropped
// afterwards); without it, a stand-in of its own runs with interleaveUpserts (concurrent upserts can collide, as on
// MongoDB) and shuffleUnsorted (an unsorted find has no order).

import { type Collection, type Db, type Document, MongoClient, MongoServerError } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AutomationsRepository, type AutomationDoc } from '../../src/automations/repository.js';
import { startMongoStandin } from '../../src/dev/mongo-standin/index.js';
import { DeliveriesRepository } from '../../src/hooks/deliveries.repository.js';
import { HooksRepository, type HookDoc } from '../../src/hooks/repository.js';
import { WebhookSecretsRepository } from '../../src/hooks/webhook-secrets.repository.js';
import { IdempotencyRepository } from '../../src/idempotency/repository.js';
import { ensureIndexes } from '../../src/repositories.js';
import { nextSequence } from '../../src/shared/counters.js';
import { ensureCollectionIndexes, IndexMigrationRequired } from '../../src/shared/indexes.js';
import { clearPublished } from '../../src/shared/outbox.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

const REAL_URL = process.env.MONGO_URL;
const isReal = !!REAL_URL;
const prefix = `product_ops_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;

let stopStandin: (() => Promise<void>) | undefined;
/** Two clients, as two processes (web and worker) would have. */
let clientA: MongoClient;
let clientB: MongoClient;
let db: Db;
let dbB: Db;
const databases: string[] = [];

beforeAll(async () => {
  let uri = REAL_URL;
  if (!uri) {
    const standin = await startMongoStandin({ quiet: true, interleaveUpserts: true, shuffleUnsorted: true });
    uri = standin.uri;
    stopStandin = () => standin.close();
  }
  clientA = await new MongoClient(uri, { serverSelectionTimeoutMS: 5000 }).connect();
  clientB = await new MongoClient(uri, { serverSelectionTimeoutMS: 5000 }).connect();
  db = clientA.db(prefix);
  dbB = clientB.db(prefix);
  databases.push(prefix);
});

afterAll(async () => {
  for (const name of databases)
    await clientA
      ?.db(name)
      .dropDatabase()
      .catch(() => undefined);
  await clientA?.close();
  await clientB?.close();
  await stopStandin?.();
});

/** Documents of the shapes under test, not the product's types (string _ids, fields the driver's types cannot see). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Shape = any;

let counter = 0;
function coll(name: string): Collection<Shape> {
  return db.collection<Shape>(`${name}_${++counter}`);
}
/** A database of its own (for the product's ensureIndexes), on both clients. */
function freshDb(): { a: Db; b: Db } {
  const name = `${prefix}_${++counter}`;
  databases.push(name);
  return { a: clientA.db(name), b: clientB.db(name) };
}

async function serverError(p: Promise<unknown>): Promise<MongoServerError> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MongoServerError);
  return error as MongoServerError;
}

const at = (minute: number) => new Date(Date.UTC(2030, 0, 1, 0, minute));

describe('hint by name (overdue scan, unfinished events)', () => {
  it('uses the named index and answers a missing one with BadValue (2)', async () => {
    const tasks = coll('tasks');
    await tasks.createIndex({ is_completed: 1, overdue_fired_for: 1, due_at: 1 }, { name: 'overdue_scan' });
    await tasks.insertMany([
      { _id: 't1' as never, is_completed: false, overdue_fired_for: null, due_at: at(3) },
      { _id: 't2' as never, is_completed: false, due_at: at(1) }, // no overdue_fired_for at all: also unfired
      { _id: 't3' as never, is_completed: false, overdue_fired_for: at(2), due_at: at(2) },
      { _id: 't4' as never, is_completed: true, overdue_fired_for: null, due_at: at(0) },
      { _id: 't5' as never, is_completed: false, overdue_fired_for: null, due_at: at(9) },
    ]);
    const due = await tasks
      .find({ is_completed: false, overdue_fired_for: null, due_at: { $lte: at(5) } })
      .sort({ due_at: 1 })
      .hint('overdue_scan')
      .limit(10)
      .toArray();
    expect(due.map((task) => task._id)).toEqual(['t2', 't1']);
    const missing = await serverError(tasks.find({}).hint('no_such_index').toArray());
    expect(missing.code).toBe(2);
    expect(missing.message).toMatch(/hint provided does not correspond to an existing index/);
  });

  it('pages a multikey index in _id order (findUnfinished)', async () => {
    const events = coll('events');
    await events.createIndex({ pending: 1, _id: 1 }, { name: 'unfinished' });
    await events.insertMany(
      ['e5', 'e1', 'e4', 'e2', 'e3'].map((id, i) => ({
        _id: id as never,
        pending: i % 2 ? ['hooks'] : ['hooks', 'automations'],
      })),
    );
    const page = (after?: string) =>
      events
        .find({ pending: 'hooks', ...(after ? { _id: { $gt: after } } : {}) })
        .sort({ _id: 1 })
        .hint('unfinished')
        .limit(2)
        .toArray();
    expect((await page()).map((e) => e._id)).toEqual(['e1', 'e2']);
    expect((await page('e2')).map((e) => e._id)).toEqual(['e3', 'e4']);
    const automations = await events.find({ pending: 'automations' }).sort({ _id: 1 }).hint('unfinished').toArray();
    expect(automations.map((e) => e._id)).toEqual(['e3', 'e4', 'e5']);
  });
});

describe('null and missing', () => {
  it('{field: null} matches null and missing; $exists: false only missing; $not $gt matches missing', async () => {
    const c = coll('nulls');
    await c.insertMany([
      { _id: 1 as never, archived_at: null, bytes: 10 },
      { _id: 2 as never, deleted_at: null },
      { _id: 3 as never, archived_at: at(1), deleted_at: at(1), bytes: 900 },
      { _id: 4 as never, archived_at: [null] },
    ]);
    const ids = async (filter: Document) =>
      (await c.find(filter).sort({ _id: 1 }).toArray()).map((doc) => doc._id as unknown as number);
    expect(await ids({ archived_at: null })).toEqual([1, 2, 4]);
    expect(await ids({ deleted_at: { $exists: false } })).toEqual([1, 4]);
    expect(await ids({ deleted_at: null })).toEqual([1, 2, 4]);
    // The shape of the outbox room check: no byte count at all counts as room.
    expect(await ids({ bytes: { $not: { $gt: 100 } } })).toEqual([1, 2, 4]);
    expect(await c.countDocuments({ archived_at: { $ne: null } })).toBe(1);
  });
});

describe('$max on dates (API key last_used_at, bulk)', () => {
  it('sets a missing field, raises an older date and keeps a newer one', async () => {
    const keys = coll('api_keys');
    await keys.insertMany([
      { _id: 'k1' as never, company_id: 'c' },
      { _id: 'k2' as never, company_id: 'c', last_used_at: at(1) },
      { _id: 'k3' as never, company_id: 'c', last_used_at: at(9) },
    ]);
    const result = await keys.bulkWrite(
      ['k1', 'k2', 'k3'].map((id) => ({
        updateOne: { filter: { company_id: 'c', _id: id as never }, update: { $max: { last_used_at: at(5) } } },
      })),
      { ordered: false },
    );
    expect(result.matchedCount).toBe(3);
    expect(result.modifiedCount).toBe(2);
    const rows = await keys.find({}).sort({ _id: 1 }).toArray();
    expect(rows.map((row) => row.last_used_at)).toEqual([at(5), at(5), at(9)]);
  });
});

describe('multikey $all / $in (duplicate tokens)', () => {
  it('matches any or all tokens through a compound multikey index, newest first', async () => {
    const items = coll('items');
    await items.createIndex({ company_id: 1, pipeline_id: 1, dup_tokens: 1 }, { name: 'duplicate_tokens' });
    await items.insertMany([
      { _id: 'i1' as never, company_id: 'c', pipeline_id: 'p', dup_tokens: ['acme', 'corp'], created_at: at(1) },
      { _id: 'i2' as never, company_id: 'c', pipeline_id: 'p', dup_tokens: ['acme'], created_at: at(2) },
      { _id: 'i3' as never, company_id: 'c', pipeline_id: 'p', dup_tokens: ['corp', 'acme', 'ltd'], created_at: at(3) },
      { _id: 'i4' as never, company_id: 'c', pipeline_id: 'q', dup_tokens: ['acme', 'corp'], created_at: at(4) },
      { _id: 'i5' as never, company_id: 'c', pipeline_id: 'p', dup_tokens: [], created_at: at(5) },
    ]);
    const find = async (dup_tokens: Document) =>
      (
        await items
          .find({ company_id: 'c', pipeline_id: 'p', dup_tokens })
          .sort({ created_at: -1, _id: -1 })
          .limit(10)
          .toArray()
      ).map((item) => item._id);
    expect(await find({ $all: ['acme', 'corp'] })).toEqual(['i3', 'i1']);
    expect(await find({ $in: ['corp', 'ltd'] })).toEqual(['i3', 'i1']);
    expect(await find({ $in: ['acme'] })).toEqual(['i3', 'i2', 'i1']);
    expect(await find({ $all: ['nothing'] })).toEqual([]);
  });
});

function envelope(id: string): EventEnvelope {
  return { event_id: id, type: 'item.updated', company_id: 'c' } as unknown as EventEnvelope;
}

describe('the outbox clear sequence (clearPublished)', () => {
  it('drops exactly the published events: whole outboxes in one write, grown ones in the two-step fallback', async () => {
    const items = coll('outbox');
    await items.insertMany([
      // Published exactly: cleared whole.
      {
        _id: 'a',
        company_id: 'c',
        outbox_pending: true,
        outbox_bytes: 20,
        pending_events: [envelope('e1'), envelope('e2')],
      },
      // Gained e4 after e3 was read for publishing: e4 stays, with its bytes and the flag.
      {
        _id: 'b',
        company_id: 'c',
        outbox_pending: true,
        outbox_bytes: 30,
        pending_events: [envelope('e3'), envelope('e4')],
      },
      // Another company's document of the same id is never touched.
      { _id: 'z', company_id: 'other', outbox_pending: true, outbox_bytes: 5, pending_events: [envelope('e9')] },
    ]);
    await clearPublished(items, [
      { documentId: 'a', companyId: 'c', eventIds: ['e1', 'e2'], bytes: 20 },
      { documentId: 'b', companyId: 'c', eventIds: ['e3'], bytes: 10 },
      { documentId: 'z', companyId: 'c', eventIds: ['e9'], bytes: 5 },
    ]);
    const a = await items.findOne({ _id: 'a' });
    expect(a).toEqual({ _id: 'a', company_id: 'c' });
    const b = await items.findOne({ _id: 'b' });
    expect(b).toMatchObject({ outbox_pending: true, outbox_bytes: 20 });
    expect(b?.pending_events.map((e: EventEnvelope) => e.event_id)).toEqual(['e4']);
    expect(await items.findOne({ _id: 'z' })).toMatchObject({ outbox_pending: true, outbox_bytes: 5 });
    // Publishing e4 later empties b through the fallback's last step.
    await clearPublished(items, [{ documentId: 'b', companyId: 'c', eventIds: ['e4'], bytes: 20 }]);
    expect(await items.findOne({ _id: 'b' })).toEqual({ _id: 'b', company_id: 'c' });
    expect(await items.countDocuments({ outbox_pending: true })).toBe(1);
  });
});

describe('capped $push ... $slice upserts (delivery attempts)', () => {
  it('creates the record on the first attempt, keeps the last N attempts, $setOnInsert only once', async () => {
    const deliveries = coll('deliveries');
    const attempt = (n: number) => ({
      updateOne: {
        filter: { company_id: 'c', _id: 'hk_1:evt_1' as never },
        update: {
          $setOnInsert: { hook_id: 'hk_1', event_id: 'evt_1', created_at: at(n) },
          $set: { updated_at: at(n) },
          $push: { attempts: { $each: [{ attempt: n }], $slice: -3 } } as never,
        },
        upsert: true,
      },
    });
    const first = await deliveries.bulkWrite([attempt(1)], { ordered: true });
    expect(first.upsertedCount).toBe(1);
    await deliveries.bulkWrite([attempt(2), attempt(3), attempt(4)], { ordered: true });
    await deliveries.bulkWrite([attempt(5)], { ordered: true });
    const doc = await deliveries.findOne({ _id: 'hk_1:evt_1' });
    expect(doc).toMatchObject({ company_id: 'c', hook_id: 'hk_1', created_at: at(1), updated_at: at(5) });
    expect(doc?.attempts).toEqual([{ attempt: 3 }, { attempt: 4 }, { attempt: 5 }]);
  });

  it('caps an existing array on the first write of a new shape too (overdue_fired_dues)', async () => {
    const tasks = coll('tasks_dues');
    await tasks.insertOne({ _id: 't' as never, revision: 1 });
    for (let minute = 1; minute <= 4; minute++) {
      await tasks.updateOne(
        { _id: 't', revision: minute },
        { $inc: { revision: 1 }, $push: { overdue_fired_dues: { $each: [at(minute)], $slice: -2 } } as never },
      );
    }
    expect(await tasks.findOne({ _id: 't' })).toEqual({
      _id: 't',
      revision: 5,
      overdue_fired_dues: [at(3), at(4)],
    });
  });
});

describe('compare-and-set findOneAndUpdate (version / revision)', () => {
  it('exactly one of many concurrent writers with the same expected version wins', async () => {
    const items = coll('cas');
    await items.insertOne({ _id: 'i' as never, company_id: 'c', version: 1, pending: [envelope('e0')] });
    const write = (client: Db, n: number) =>
      client
        .collection(items.collectionName)
        .findOneAndUpdate(
          { company_id: 'c', _id: 'i' as never, version: 1 },
          { $set: { name: `writer ${n}` }, $inc: { version: 1 } },
          { returnDocument: 'after', projection: { pending: 0 } },
        );
    const results = await Promise.all(Array.from({ length: 10 }, (_, n) => write(n % 2 ? db : dbB, n)));
    const winners = results.filter((doc) => doc !== null);
    expect(winners).toHaveLength(1);
    expect(winners[0]).toMatchObject({ version: 2 });
    expect(winners[0]).not.toHaveProperty('pending');
    expect(await items.findOne({ _id: 'i' })).toMatchObject({ version: 2, name: winners[0]?.name });
  });
});

describe('$setOnInsert of _id (hook subscribe)', () => {
  it('sets the _id of the created document and leaves an existing one alone', async () => {
    const hooks = coll('hooks');
    const subscribe = (id: string) =>
      hooks.findOneAndUpdate(
        { company_id: 'c', target_url: 'http://127.0.0.1/x', event: '*' },
        { $setOnInsert: { _id: id, created_at: at(1) }, $set: { disabled_at: null } },
        { upsert: true, returnDocument: 'after' },
      );
    expect(await subscribe('hk_first')).toMatchObject({
      _id: 'hk_first',
      company_id: 'c',
      event: '*',
      disabled_at: null,
    });
    expect(await subscribe('hk_second')).toMatchObject({ _id: 'hk_first' });
    expect(await hooks.countDocuments()).toBe(1);
  });
});

describe('concurrent upserts', () => {
  // MongoDB (4.2+ for update, 5.0+ for findAndModify) retries an upsert that lost the insert race itself when its
  // filter is equality on exactly the fields of the unique index that refused it and the update leaves them alone;
  // any other shape hands the loser E11000, which the product's duplicate-key branches handle.
  it('counters ($inc upsert on _id) never hand out one number twice, on first use from two processes', async () => {
    const numbers = await Promise.all(
      Array.from({ length: 12 }, (_, n) => nextSequence(n % 2 ? db : dbB, 'seq_first')),
    );
    expect(numbers.sort((x, y) => x - y)).toEqual(Array.from({ length: 12 }, (_, n) => n + 1));
  });

  it('hook subscribe: concurrent subscriptions to one target and event make one hook', async () => {
    const names = freshDb();
    await HooksRepository.ensureIndexes(names.a);
    const hook = (n: number): HookDoc =>
      ({
        _id: `hk_${n}`,
        company_id: 'c',
        target_url: 'http://127.0.0.1:9/hook',
        event: 'item.created',
        disabled_at: null,
        failing_since: null,
        created_at: at(n),
      }) as unknown as HookDoc;
    const repositories = [new HooksRepository(names.a), new HooksRepository(names.b)] as const;
    const hooks = await Promise.all(
      Array.from({ length: 6 }, (_, n) => (n % 2 ? repositories[1] : repositories[0]).subscribe(hook(n), 25)),
    );
    // One insert wins; every other subscribe finds that hook (the service answers 409 hook_exists with it).
    expect(hooks.filter((result) => 'created' in result)).toHaveLength(1);
    const ids = hooks.map((result) =>
      'created' in result ? result.created._id : 'existing' in result ? result.existing._id : 'full',
    );
    expect(new Set(ids).size).toBe(1);
    expect(await names.a.collection('hooks').countDocuments()).toBe(1);
  });

  it('hook subscribe: concurrent subscriptions from two processes keep exactly the cap (each a slot of its own)', async () => {
    const names = freshDb();
    await HooksRepository.ensureIndexes(names.a);
    const hook = (n: number): HookDoc =>
      ({
        _id: `hk_${n}`,
        company_id: 'c',
        target_url: `http://127.0.0.1:9/hook/${n}`,
        event: '*',
        disabled_at: null,
        failing_since: null,
        created_at: at(n),
      }) as unknown as HookDoc;
    const repositories = [new HooksRepository(names.a), new HooksRepository(names.b)] as const;
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, n) => (n % 2 ? repositories[1] : repositories[0]).subscribe(hook(n), 10)),
    );
    expect(results.filter((result) => 'created' in result)).toHaveLength(10);
    expect(results.filter((result) => 'full' in result)).toHaveLength(6);
    const stored = await names.a.collection('hooks').find({}).toArray();
    expect(stored.map((doc) => doc.slot as number).sort((x, y) => x - y)).toEqual([...Array(10).keys()]);
  });

  it('automation runs: of concurrent starts of one run exactly one starts it (the loser gets E11000: null)', async () => {
    const automation = { _id: 'aut_1', company_id: 'c' } as unknown as AutomationDoc;
    const event = { event_id: 'evt_1', type: 'task.created' };
    const repositories = [new AutomationsRepository(db), new AutomationsRepository(dbB)] as const;
    // Each test sees a collection of its own only through the repository's fixed name; this one is used here only.
    const started = await Promise.all(
      Array.from({ length: 4 }, (_, n) => (n % 2 ? repositories[1] : repositories[0]).startRun(automation, event, 0)),
    );
    expect(started.filter((id) => id !== null)).toHaveLength(1);
    expect(await db.collection('automation_runs').countDocuments({ _id: 'aut_1:evt_1' as never })).toBe(1);
  });

  it('delivery attempts: two first attempts of one delivery at once both land in one record', async () => {
    const repositories = [new DeliveriesRepository(db), new DeliveriesRepository(dbB)] as const;
    const record = (n: number) => ({
      key: 'hk_1:evt_race',
      target: { hook_id: 'hk_1' },
      event: { ...envelope('evt_race'), type: 'item.created' },
      attempt: { attempt: n, attempted_at: at(n), next_retry_at: null },
      job: { id: 'job_race', target: { kind: 'hook', hook_id: 'hk_1' } },
    });
    await Promise.all([
      repositories[0].recordAttempt(record(1) as never),
      repositories[1].recordAttempt(record(2) as never),
    ]);
    const doc = await db.collection('deliveries').findOne({ _id: 'hk_1:evt_race' as never });
    expect(doc?.attempts.map((a: { attempt: number }) => a.attempt).sort()).toEqual([1, 2]);
  });

  it('delivery attempts: a first attempt inserts its record, or appends to one that exists; later ones append', async () => {
    const repository = new DeliveriesRepository(db);
    const event = (id: string) => ({ ...envelope(id), type: 'item.created' }) as EventEnvelope;
    const hook = { hook_id: 'hk_ins', automation_id: null } as const;
    const job = (id: string) => ({ id: `job_${id}`, target: { kind: 'hook' as const, hook_id: 'hk_ins' } });
    const attempt = (n: number, nextRetryAt: Date | null = null) => ({
      attempt: n,
      status_code: n === 1 ? 503 : 200,
      error: n === 1 ? ('http_status' as const) : null,
      duration_ms: 4,
      succeeded: n !== 1,
      next_retry_at: nextRetryAt,
      attempted_at: at(n),
      response_body: '',
    });
    // evt_old was handed to the deliveries lane first: its record exists before its first attempt.
    await repository.recordScheduled({
      key: 'hk_ins:evt_old',
      target: hook,
      event: event('evt_old'),
      job: { id: 'job_evt_old', event: event('evt_old'), target: job('evt_old').target },
    });
    await repository.recordAttempts([
      { key: 'hk_ins:evt_new', target: hook, event: event('evt_new'), attempt: attempt(1, at(9)), job: job('evt_new') },
      { key: 'hk_ins:evt_old', target: hook, event: event('evt_old'), attempt: attempt(1), job: job('evt_old') },
      { key: 'hk_ins:evt_new', target: hook, event: event('evt_new'), attempt: attempt(2), job: job('evt_new') },
    ]);
    // The inserted record is the document the upsert would have made, with both attempts in order.
    expect(await db.collection('deliveries').findOne({ _id: 'hk_ins:evt_new' as never })).toEqual({
      _id: 'hk_ins:evt_new',
      company_id: 'c',
      hook_id: 'hk_ins',
      automation_id: null,
      event_id: 'evt_new',
      event_type: 'item.created',
      event: event('evt_new'),
      attempts: [attempt(1, at(9)), attempt(2)],
      next_attempt_at: null,
      job_id: 'job_evt_new',
      target: { kind: 'hook', hook_id: 'hk_ins' },
      attempts_made: 2,
      // The deliveries list's status (DECISIONS.md 13.2), and when an attempt first succeeded.
      status: 'succeeded',
      delivered_at: at(2),
      created_at: at(1),
      updated_at: at(2),
    });
    const old = await db.collection('deliveries').findOne({ _id: 'hk_ins:evt_old' as never });
    expect(old).toMatchObject({ attempts: [attempt(1)], attempts_made: 1, next_attempt_at: null, updated_at: at(1) });
    expect(await repository.recentAttempts('c', 'hk_ins', 10)).toHaveLength(3);
  });

  it('delivery attempts: a delivered first attempt is a compact record, listed whole and never due', async () => {
    const repository = new DeliveriesRepository(db);
    const delivered = (id: string, hookId: string, responseBody: string) => ({
      key: `${hookId}:${id}`,
      target: { hook_id: hookId, automation_id: null },
      event: { ...envelope(id), type: 'item.created' } as EventEnvelope,
      attempt: {
        attempt: 1,
        status_code: 204,
        error: null,
        duration_ms: 3,
        succeeded: true,
        next_retry_at: null,
        attempted_at: at(5),
        response_body: responseBody,
      },
      job: { id: `job_${id}`, target: { kind: 'hook' as const, hook_id: hookId } },
    });
    await repository.recordAttempts([delivered('evt_c1', 'hk_compact', ''), delivered('evt_c2', 'hk_compact', 'ok')]);
    // Nothing is due and nothing is sent from it again: no null, empty or scheduling fields, no envelope.
    expect(await db.collection('deliveries').findOne({ _id: 'hk_compact:evt_c1' as never })).toEqual({
      _id: 'hk_compact:evt_c1',
      company_id: 'c',
      hook_id: 'hk_compact',
      event_id: 'evt_c1',
      event_type: 'item.created',
      attempts: [{ attempt: 1, status_code: 204, duration_ms: 3, succeeded: true, attempted_at: at(5) }],
      status: 'succeeded',
      updated_at: at(5),
    });
    const listed = await repository.recentAttempts('c', 'hk_compact', 10);
    expect(
      listed
        .map(({ event_id, error, next_retry_at, response_body }) => ({ event_id, error, next_retry_at, response_body }))
        .sort((a, b) => a.event_id.localeCompare(b.event_id)),
    ).toEqual([
      { event_id: 'evt_c1', error: null, next_retry_at: null, response_body: undefined },
      { event_id: 'evt_c2', error: null, next_retry_at: null, response_body: 'ok' },
    ]);
    const due = async () => (await repository.dueAttempts(100)).deliveries.map((delivery) => delivery.jobId);
    expect(await due()).not.toContain('job_evt_c1');

    // A redelivery that fails is appended to the compact record, which then holds what schedules its retry.
    const retryAt = at(30);
    await repository.recordAttempts([
      {
        ...delivered('evt_c1', 'hk_compact', ''),
        attempt: {
          attempt: 1,
          status_code: 500,
          error: 'http_status',
          duration_ms: 2,
          succeeded: false,
          next_retry_at: retryAt,
          attempted_at: at(20),
          response_body: 'down',
        },
        job: { id: 'job_redeliver_c1', target: { kind: 'hook' as const, hook_id: 'hk_compact' } },
      },
    ]);
    expect(await db.collection('deliveries').findOne({ _id: 'hk_compact:evt_c1' as never })).toMatchObject({
      event: { event_id: 'evt_c1' },
      next_attempt_at: retryAt,
      job_id: 'job_redeliver_c1',
      attempts_made: 1,
      updated_at: at(20),
    });
    expect(await due()).toContain('job_redeliver_c1');
  });

  it('idempotency claims and webhook secrets: one winner, everyone sees it', async () => {
    const claims = await Promise.all(
      Array.from({ length: 6 }, (_, n) => new IdempotencyRepository(n % 2 ? db : dbB).claim('key_race', 'k', 'h')),
    );
    expect(claims.filter((claim) => claim.claimed)).toHaveLength(1);
    const secrets = await Promise.all(
      Array.from({ length: 6 }, (_, n) => new WebhookSecretsRepository(n % 2 ? db : dbB).forCompany('cmp_race')),
    );
    expect(new Set(secrets).size).toBe(1);
  });

  it.skipIf(isReal)('the stand-in makes the race happen: a shape MongoDB does not retry collides', async () => {
    const c = coll('race');
    await c.createIndex({ k: 1 }, { unique: true, name: 'k_unique' });
    const upsert = (client: Db, n: number) =>
      client
        .collection(c.collectionName)
        .updateOne({ k: 'x', n: { $gte: 0 } }, { $set: { n } }, { upsert: true })
        .then(
          () => 'ok',
          (e: unknown) => (e instanceof MongoServerError ? e.code : 'other'),
        );
    const outcomes = await Promise.all([upsert(db, 1), upsert(dbB, 2)]);
    expect(outcomes.sort()).toEqual([11000, 'ok']);
  });
});

describe('the 16 MiB document limit', () => {
  it('refuses an update that grows a document past 16 MiB with 17419, and an oversized insert with 10334', async () => {
    const c = coll('big');
    await c.insertOne({ _id: 'b' as never, pending: [] });
    const chunk = 'x'.repeat(5 * 1024 * 1024);
    for (let i = 0; i < 3; i++) await c.updateOne({ _id: 'b' }, { $push: { pending: chunk } as never });
    const tooBig = await serverError(c.updateOne({ _id: 'b' }, { $push: { pending: chunk } as never }));
    expect(tooBig.code).toBe(17419);
    expect((await c.findOne({ _id: 'b' }))?.pending).toHaveLength(3);
    const insert = await serverError(
      c.insertOne({ _id: 'c' as never, blob: 'y'.repeat(16 * 1024 * 1024 + 100 * 1024) }),
    );
    expect(insert.code).toBe(10334);
  });
});

describe('$inc on null', () => {
  it('fails with TypeMismatch (14) instead of counting from 0; on a missing field it starts from 0', async () => {
    const c = coll('inc');
    await c.insertMany([{ _id: 1 as never, n: null }, { _id: 2 as never }]);
    const error = await serverError(c.updateOne({ _id: 1 }, { $inc: { n: 1 } }));
    expect(error.code).toBe(14);
    expect(error.message).toMatch(/Cannot apply \$inc to a value of non-numeric type.*null/);
    expect(await c.findOne({ _id: 1 })).toEqual({ _id: 1, n: null });
    await c.updateOne({ _id: 2 }, { $inc: { n: 1 } });
    expect(await c.findOne({ _id: 2 })).toEqual({ _id: 2, n: 1 });
  });
});

describe('ensureIndexes', () => {
  it('is idempotent: a second run changes nothing and rebuilds nothing', async () => {
    const { a } = freshDb();
    expect(await ensureIndexes(a)).toEqual([]);
    const before = await a.collection('items').listIndexes().toArray();
    expect(await ensureIndexes(a)).toEqual([]);
    expect(await a.collection('items').listIndexes().toArray()).toEqual(before);
  });

  it('two processes creating the same indexes at once both succeed, each index once', async () => {
    const { a, b } = freshDb();
    const [first, second] = await Promise.all([ensureIndexes(a), ensureIndexes(b)]);
    expect([first, second]).toEqual([[], []]);
    const names = (await a.collection('idempotency_keys').listIndexes().toArray()).map((index) => index.name);
    expect(names.sort()).toEqual(['_id_', 'expiry_ttl', 'key_scope_unique']);
  });

  it('the server answers an index of the same name with other options 85, with other keys 86, same keys under another name 85', async () => {
    const c = coll('conflicts');
    await c.createIndex({ t: 1 }, { name: 't_ttl', expireAfterSeconds: 60 });
    expect(await c.createIndex({ t: 1 }, { name: 't_ttl', expireAfterSeconds: 60 })).toBe('t_ttl'); // identical: no-op
    const ttl = await serverError(c.createIndex({ t: 1 }, { name: 't_ttl', expireAfterSeconds: 0 }));
    expect([ttl.code, ttl.codeName]).toEqual([85, 'IndexOptionsConflict']);
    expect(ttl.message).toMatch(/^An equivalent index already exists with the same name but different options/);
    const keys = await serverError(c.createIndex({ t: 1, u: 1 }, { name: 't_ttl' }));
    expect([keys.code, keys.codeName]).toEqual([86, 'IndexKeySpecsConflict']);
    const unique = await serverError(c.createIndex({ t: 1 }, { name: 't_ttl', unique: true }));
    expect(unique.code).toBe(86); // unique is part of what identifies an index (MongoDB 5.0+)
    const renamed = await serverError(c.createIndex({ t: 1 }, { name: 'other', expireAfterSeconds: 60 }));
    expect(renamed.code).toBe(85);
    expect(renamed.message).toBe('Index already exists with a different name: t_ttl');
    // Same keys but another identity (unique): a second index, allowed.
    expect(await c.createIndex({ t: 1 }, { name: 't_unique', unique: true })).toBe('t_unique');
  });

  it('rebuilds a migratable index whose declaration changed, from two processes at once', async () => {
    const { a, b } = freshDb();
    await a
      .collection('idempotency_keys')
      .createIndex({ expires_at: 1 }, { name: 'expiry_ttl', expireAfterSeconds: 3600 });
    const [first, second] = await Promise.all([ensureIndexes(a), ensureIndexes(b)]);
    expect([...first, ...second]).toContain('idempotency_keys.expiry_ttl');
    const ttl = (await a.collection('idempotency_keys').listIndexes().toArray()).find((i) => i.name === 'expiry_ttl');
    expect(ttl).toMatchObject({ key: { expires_at: 1 }, expireAfterSeconds: 0 });
    expect(await ensureIndexes(a)).toEqual([]);
  });

  it('stops with one line naming the index and what to do when a non-migratable index changed', async () => {
    const { a } = freshDb();
    await a.collection('idempotency_keys').createIndex({ key_id: 1 }, { name: 'key_scope_unique', unique: true });
    const error = await ensureIndexes(a).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(IndexMigrationRequired);
    const message = (error as Error).message;
    expect(message).not.toContain('\n');
    expect(message).toContain('idempotency_keys.key_scope_unique');
    expect(message).toContain('db.idempotency_keys.dropIndex("key_scope_unique")');
    // Nothing was dropped: the existing index still guards its data.
    const names = (await a.collection('idempotency_keys').listIndexes().toArray()).map((index) => index.name);
    expect(names).toContain('key_scope_unique');
  });

  it('names the other index when the declared keys exist under another name', async () => {
    const c = coll('renamed');
    await c.createIndex({ company_id: 1, _id: 1 }, { name: 'legacy_company' });
    const error = await ensureCollectionIndexes(db, c.collectionName, [
      { key: { company_id: 1, _id: 1 }, name: 'company_id', migratable: true },
    ]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(IndexMigrationRequired);
    expect((error as Error).message).toContain(`${c.collectionName}.company_id clashes with an existing index`);
  });
});

describe('unsorted finds', () => {
  it.skipIf(isReal)('come back in a random order from the test stand-in; sorted ones never do', async () => {
    const c = coll('order');
    await c.insertMany(Array.from({ length: 20 }, (_, n) => ({ _id: n as never })));
    const orders = new Set<string>();
    for (let i = 0; i < 5; i++) orders.add((await c.find({}).toArray()).map((d) => d._id).join());
    expect(orders.size).toBeGreaterThan(1);
    const sorted = new Set<string>();
    for (let i = 0; i < 5; i++) sorted.add((await c.find({}).sort({ _id: 1 }).toArray()).map((d) => d._id).join());
    expect(sorted.size).toBe(1);
  });
});
