// Conformance suite for the mongo stand-in, driven only through the official
// driver. Set MONGO_URL to run the very same suite against a real MongoDB
// (a unique database is used and dropped afterwards).

import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import {
  Binary,
  type Collection,
  Decimal128,
  type Db,
  type Document,
  Long,
  MongoBulkWriteError,
  MongoClient,
  MongoServerError,
  ObjectId,
} from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMongoStandin } from '../../src/dev/mongo-standin/index.js';
import { normaliseSpec } from '../../src/dev/mongo-standin/indexes.js';
import { Store } from '../../src/dev/mongo-standin/storage.js';
import { keyOf, type Doc } from '../../src/dev/mongo-standin/values.js';
import { must } from '../../src/shared/must.js';

const REAL_URL = process.env.MONGO_URL;
const isReal = !!REAL_URL;
const dbName = `standin_conformance_${Date.now()}_${Math.floor(Math.random() * 1e6)}`;

let uri: string;
let stopStandin: (() => Promise<void>) | undefined;
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  if (REAL_URL) uri = REAL_URL;
  else {
    const standin = await startMongoStandin({ port: 0, quiet: true });
    uri = standin.uri;
    stopStandin = () => standin.close();
  }
  client = new MongoClient(uri, { maxPoolSize: 100, serverSelectionTimeoutMS: 5000 });
  await client.connect();
  db = client.db(dbName);
});

afterAll(async () => {
  await db?.dropDatabase().catch(() => undefined);
  await client
    ?.db(`${dbName}_x`)
    .dropDatabase()
    .catch(() => undefined);
  await client?.close();
  await stopStandin?.();
});

let counter = 0;
/** A fresh collection per test keeps tests independent. */
function coll<T extends Document = Document>(name = 'c'): Collection<T> {
  return db.collection<T>(`${name}_${++counter}`);
}

async function expectServerError(p: Promise<unknown>): Promise<MongoServerError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(MongoServerError);
  return err as MongoServerError;
}

describe('CRUD', () => {
  it('inserts, finds, updates, replaces and deletes', async () => {
    const c = coll();
    const one = await c.insertOne({ name: 'ann', age: 30 });
    expect(one.insertedId).toBeInstanceOf(ObjectId);
    const many = await c.insertMany([
      { name: 'bob', age: 25 },
      { name: 'cy', age: 35 },
      { name: 'dee', age: 40 },
    ]);
    expect(many.insertedCount).toBe(3);

    expect(await c.findOne({ _id: one.insertedId })).toMatchObject({ name: 'ann', age: 30 });
    const older = await c
      .find({ age: { $gte: 30 } })
      .sort({ age: -1 })
      .toArray();
    expect(older.map((d) => d.name)).toEqual(['dee', 'cy', 'ann']);

    const u1 = await c.updateOne({ name: 'bob' }, { $set: { age: 26 } });
    expect([u1.matchedCount, u1.modifiedCount]).toEqual([1, 1]);
    const same = await c.updateOne({ name: 'bob' }, { $set: { age: 26 } });
    expect([same.matchedCount, same.modifiedCount]).toEqual([1, 0]);
    const um = await c.updateMany({ age: { $gt: 26 } }, { $set: { senior: true } });
    expect([um.matchedCount, um.modifiedCount]).toEqual([3, 3]);
    const none = await c.updateOne({ name: 'nobody' }, { $set: { x: 1 } });
    expect([none.matchedCount, none.modifiedCount, none.upsertedCount]).toEqual([0, 0, 0]);

    const r = await c.replaceOne({ name: 'cy' }, { name: 'cy', replaced: true });
    expect(r.modifiedCount).toBe(1);
    const cy = await c.findOne({ name: 'cy' });
    expect(cy).toEqual({ _id: cy!._id, name: 'cy', replaced: true });

    expect((await c.deleteOne({ senior: true })).deletedCount).toBe(1);
    expect((await c.deleteMany({ senior: true })).deletedCount).toBe(1);
    expect((await c.deleteMany({ nothing: 1 })).deletedCount).toBe(0);
    expect(await c.countDocuments()).toBe(2);
  });

  it('rejects changing _id and keeps it on replacement', async () => {
    const c = coll();
    await c.insertOne({ _id: 1 as never, a: 1 });
    const err = await expectServerError(c.updateOne({ _id: 1 as never }, { $set: { _id: 2 } as never }));
    expect(err.code).toBe(66);
    await c.replaceOne({ _id: 1 as never }, { b: 2 });
    expect(await c.findOne({ _id: 1 as never })).toEqual({ _id: 1, b: 2 });
  });
});

describe('update operators', () => {
  it('$set $unset $inc $min $max $currentDate $setOnInsert', async () => {
    const c = coll();
    await c.insertOne({ _id: 'a' as never, n: 5, lo: 10, hi: 10, gone: 1, nested: { x: 1 } });
    const before = new Date();
    await c.updateOne(
      { _id: 'a' as never },
      {
        $set: { 'nested.y': 2, s: 'x' },
        $unset: { gone: '' },
        $inc: { n: 2, fresh: 1 },
        $min: { lo: 3 },
        $max: { hi: 20 },
        $currentDate: { touched: true },
        $setOnInsert: { onlyOnInsert: true },
      },
    );
    const doc = await c.findOne({ _id: 'a' as never });
    expect(doc).toMatchObject({ n: 7, fresh: 1, lo: 3, hi: 20, nested: { x: 1, y: 2 }, s: 'x' });
    expect(doc).not.toHaveProperty('gone');
    expect(doc).not.toHaveProperty('onlyOnInsert');
    expect(doc!.touched).toBeInstanceOf(Date);
    expect(doc!.touched.getTime()).toBeGreaterThanOrEqual(before.getTime() - 1000);

    const up = await c.updateOne(
      { key: 'new', kind: { $eq: 'k' } },
      { $set: { v: 1 }, $setOnInsert: { created: true } },
      { upsert: true },
    );
    expect(up.upsertedCount).toBe(1);
    expect(await c.findOne({ _id: up.upsertedId! })).toMatchObject({ key: 'new', kind: 'k', v: 1, created: true });
  });

  it('$push with $each/$slice, $pull, $addToSet', async () => {
    const c = coll();
    await c.insertOne({ _id: 1 as never, log: [1, 2], tags: ['a'], nums: [1, 2, 3, 4, 5] });
    await c.updateOne({ _id: 1 as never }, { $push: { log: { $each: [3, 4, 5], $slice: -3 } } as never });
    await c.updateOne({ _id: 1 as never }, { $push: { fresh: { $each: [1, 2, 3], $slice: -2 } } as never });
    await c.updateOne({ _id: 1 as never }, { $addToSet: { tags: { $each: ['a', 'b', 'b'] } } });
    await c.updateOne({ _id: 1 as never }, { $pull: { nums: { $gte: 4 } } as never });
    expect(await c.findOne({ _id: 1 as never })).toEqual({
      _id: 1,
      log: [3, 4, 5],
      tags: ['a', 'b'],
      nums: [1, 2, 3],
      fresh: [2, 3],
    });
  });

  it('positional updates with arrayFilters and $', async () => {
    const c = coll();
    await c.insertOne({
      _id: 1 as never,
      items: [
        { sku: 'a', qty: 1 },
        { sku: 'b', qty: 5 },
        { sku: 'c', qty: 9 },
      ],
    });
    await c.updateOne(
      { _id: 1 as never },
      { $set: { 'items.$[big].flag': true } },
      { arrayFilters: [{ 'big.qty': { $gte: 5 } }] },
    );
    await c.updateOne({ _id: 1 as never, 'items.sku': 'a' }, { $inc: { 'items.$.qty': 10 } });
    const doc = await c.findOne({ _id: 1 as never });
    expect(doc!.items).toEqual([
      { sku: 'a', qty: 11 },
      { sku: 'b', qty: 5, flag: true },
      { sku: 'c', qty: 9, flag: true },
    ]);
  });

  it('reports type errors instead of silently ignoring them', async () => {
    const c = coll();
    await c.insertOne({ _id: 1 as never, s: 'text' });
    expect((await expectServerError(c.updateOne({ _id: 1 as never }, { $inc: { s: 1 } }))).code).toBe(14);
    expect((await expectServerError(c.updateOne({ _id: 1 as never }, { $push: { s: 1 } as never }))).code).toBe(2);
  });
});

describe('findOneAndUpdate compare-and-set', () => {
  it('exactly one of 50 concurrent callers wins', async () => {
    const c = coll();
    const _id = new ObjectId();
    await c.insertOne({ _id, version: 1 });
    const connectionIds = new Set<unknown>();
    const casClient = new MongoClient(uri, { maxPoolSize: 60, minPoolSize: 20, monitorCommands: true });
    casClient.on('commandStarted', (e) => {
      if (e.commandName === 'findAndModify') connectionIds.add(e.connectionId);
    });
    await casClient.connect();
    try {
      const cc = casClient.db(dbName).collection(c.collectionName);
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          cc.findOneAndUpdate(
            { _id, version: 1 },
            { $set: { winner: i }, $inc: { version: 1 } },
            { returnDocument: 'after' },
          ),
        ),
      );
      const winners = results.filter((r) => r !== null);
      expect(winners).toHaveLength(1);
      expect(winners[0]?.version).toBe(2);
      const final = await c.findOne({ _id });
      expect(final).toEqual({ _id, version: 2, winner: winners[0]?.winner });
      expect(connectionIds.size).toBeGreaterThan(1);
    } finally {
      await casClient.close();
    }
  });

  it('supports sort, remove, upsert, new and projection', async () => {
    const c = coll();
    await c.insertMany([
      { q: 'x', p: 3 },
      { q: 'x', p: 1 },
      { q: 'x', p: 2 },
    ]);
    const first = await c.findOneAndUpdate(
      { q: 'x' },
      { $set: { taken: true } },
      { sort: { p: 1 }, projection: { _id: 0, p: 1 } },
    );
    expect(first).toEqual({ p: 1 });
    const removed = await c.findOneAndDelete({ q: 'x' }, { sort: { p: -1 } });
    expect(removed).toMatchObject({ p: 3 });
    const meta = await c.findOneAndUpdate(
      { q: 'y' },
      { $set: { p: 9 } },
      { upsert: true, returnDocument: 'after', includeResultMetadata: true },
    );
    expect(meta.value).toMatchObject({ q: 'y', p: 9 });
    expect(meta.lastErrorObject).toMatchObject({ n: 1, updatedExisting: false });
    expect(meta.lastErrorObject!.upserted).toBeInstanceOf(ObjectId);
    const before = await c.findOneAndReplace({ q: 'y' }, { q: 'y', p: 10 }, { returnDocument: 'before' });
    expect(before).toMatchObject({ p: 9 });
    expect(await c.findOneAndUpdate({ q: 'none' }, { $set: { a: 1 } })).toBeNull();
  });
});

describe('unique indexes', () => {
  it('rejects duplicates on insert with the driver error shapes', async () => {
    const c = coll();
    expect(await c.createIndex({ email: 1 }, { unique: true })).toBe('email_1');
    await c.insertOne({ email: 'a@x' });
    const err = await expectServerError(c.insertOne({ email: 'a@x' }));
    expect(err.code).toBe(11000);
    expect(err.keyValue).toEqual({ email: 'a@x' });
    expect(err.message).toContain('E11000 duplicate key error collection:');
    expect(err.message).toContain('index: email_1 dup key: { email: "a@x" }');

    const ordered = await c.insertMany([{ email: 'b@x' }, { email: 'a@x' }, { email: 'c@x' }]).catch((e: unknown) => e);
    expect(ordered).toBeInstanceOf(MongoBulkWriteError);
    const be = ordered as MongoBulkWriteError;
    expect(be.code).toBe(11000);
    expect(be.insertedCount).toBe(1);
    expect(be.writeErrors).toHaveLength(1);
    const we = Array.isArray(be.writeErrors) ? be.writeErrors[0] : be.writeErrors;
    expect(we.index).toBe(1);
    expect(we.code).toBe(11000);

    const unordered = (await c
      .insertMany([{ email: 'd@x' }, { email: 'a@x' }, { email: 'e@x' }], { ordered: false })
      .catch((e: unknown) => e)) as MongoBulkWriteError;
    expect(unordered).toBeInstanceOf(MongoBulkWriteError);
    expect(unordered.insertedCount).toBe(2);
    expect(await c.countDocuments()).toBe(4);

    const idErr = await expectServerError(c.insertOne({ _id: (await c.findOne({ email: 'a@x' }))!._id, email: 'z' }));
    expect(idErr.code).toBe(11000);
    expect(idErr.message).toContain('index: _id_ dup key: { _id: ObjectId(');
  });

  it('rejects duplicates on update, upsert and findOneAndUpdate', async () => {
    const c = coll();
    await c.createIndex({ tenant: 1, slug: 1 }, { unique: true, name: 'tenant_slug' });
    await c.insertMany([
      { tenant: 't', slug: 'a' },
      { tenant: 't', slug: 'b' },
    ]);
    const upd = await expectServerError(c.updateOne({ slug: 'b' }, { $set: { slug: 'a' } }));
    expect(upd.code).toBe(11000);
    expect(upd.keyValue).toEqual({ tenant: 't', slug: 'a' });

    const ups = await expectServerError(
      c.updateOne({ slug: 'zzz', other: 1 }, { $set: { tenant: 't', slug: 'a' } }, { upsert: true }),
    );
    expect(ups.code).toBe(11000);

    const fam = await expectServerError(c.findOneAndUpdate({ slug: 'b' }, { $set: { slug: 'a' } }));
    expect(fam.code).toBe(11000);
    expect(fam.codeName).toBe('DuplicateKey');
    expect(fam.keyValue).toEqual({ tenant: 't', slug: 'a' });
    expect(fam.keyPattern).toEqual({ tenant: 1, slug: 1 });
    expect(await c.findOne({ slug: 'b' })).not.toBeNull();
  });

  it('keeps index entries right when updates touch other fields, dotted paths and renames', async () => {
    const c = coll();
    await c.createIndex({ 'a.b': 1 }, { unique: true, name: 'ab' });
    await c.createIndex({ tenant: 1, n: 1 }, { name: 'tenant_n' });
    await c.insertMany([
      { _id: 'one' as never, tenant: 't', n: 1, a: { b: 1 } },
      { _id: 'two' as never, tenant: 't', n: 2, a: { b: 2 }, x: 7 },
    ]);
    await c.updateOne({ _id: 'one' as never }, { $set: { other: 'changed' } });
    expect(await c.findOne({ tenant: 't', n: 1 })).toMatchObject({ _id: 'one', other: 'changed' });
    expect((await expectServerError(c.insertOne({ a: { b: 1 } }))).code).toBe(11000);

    await c.updateOne({ _id: 'one' as never }, { $set: { 'a.b': 10 } });
    expect(await c.findOne({ 'a.b': 10 })).toMatchObject({ _id: 'one' });
    expect(await c.findOne({ 'a.b': 1 })).toBeNull();
    await c.insertOne({ a: { b: 1 } }); // the old key is free again

    await c.updateOne({ _id: 'two' as never }, { $rename: { x: 'n' } }); // replaces n: 2
    expect(await c.findOne({ tenant: 't', n: 7 })).toMatchObject({ _id: 'two' });
    expect(await c.findOne({ tenant: 't', n: 2 })).toBeNull();
  });

  it('fails to build a unique index over existing duplicates', async () => {
    const c = coll();
    await c.insertMany([{ k: 1 }, { k: 1 }]);
    const err = await expectServerError(c.createIndex({ k: 1 }, { unique: true }));
    expect(err.code).toBe(11000);
    expect((await c.listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_']);
  });

  it('honours partialFilterExpression and sparse', async () => {
    const c = coll();
    await c.createIndex({ email: 1 }, { unique: true, partialFilterExpression: { deleted: false } });
    await c.insertMany([
      { email: 'a', deleted: true },
      { email: 'a', deleted: true },
      { email: 'a', deleted: false },
    ]);
    const err = await expectServerError(c.insertOne({ email: 'a', deleted: false }));
    expect(err.code).toBe(11000);
    await c.updateOne({ deleted: false }, { $set: { deleted: true } });
    await c.insertOne({ email: 'a', deleted: false });

    const s = coll();
    await s.createIndex({ code: 1 }, { unique: true, sparse: true });
    await s.insertMany([{ x: 1 }, { x: 2 }, { code: 'c' }]);
    expect((await expectServerError(s.insertOne({ code: 'c' }))).code).toBe(11000);

    const n = coll();
    await n.createIndex({ code: 1 }, { unique: true });
    await n.insertOne({ x: 1 });
    const nullErr = await expectServerError(n.insertOne({ x: 2 }));
    expect(nullErr.keyValue).toEqual({ code: null });
  });
});

describe('TTL', () => {
  it(
    'removes expired documents',
    async () => {
      // MongoDB's TTL monitor passes every 60 s by default; both servers take the parameter that shortens it.
      const was = await client.db('admin').command({ setParameter: 1, ttlMonitorSleepSecs: 1 });
      const c = coll();
      await c.createIndex({ createdAt: 1 }, { expireAfterSeconds: 3600 });
      const old = new Date(Date.now() - 2 * 3600_000);
      await c.insertMany([
        { k: 'old', createdAt: old },
        { k: 'fresh', createdAt: new Date() },
        { k: 'noDate', createdAt: 'not a date' },
      ]);
      const deadline = Date.now() + (isReal ? 90_000 : 5000);
      while ((await c.countDocuments({ k: 'old' })) > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, isReal ? 1000 : 20));
      }
      expect((await c.find({}, { projection: { _id: 0, k: 1 } }).toArray()).map((d) => d.k).sort()).toEqual([
        'fresh',
        'noDate',
      ]);
      const idx = (await c.listIndexes().toArray()).find((i) => i.name === 'createdAt_1');
      expect(idx?.expireAfterSeconds).toBe(3600);
      await client.db('admin').command({ setParameter: 1, ttlMonitorSleepSecs: was.was });
    },
    isReal ? 120_000 : 10_000,
  );
});

describe('cursors and paging', () => {
  it('pages 5,000 sorted documents with batchSize 100 without loss or repeats', async () => {
    const c = coll();
    const docs = Array.from({ length: 5000 }, (_, i) => ({ seq: (i * 7919) % 5000, pad: 'x'.repeat(20) }));
    await c.insertMany(docs);
    let getMores = 0;
    const mon = new MongoClient(uri, { monitorCommands: true });
    mon.on('commandStarted', (e) => e.commandName === 'getMore' && getMores++);
    try {
      const cursor = mon
        .db(dbName)
        .collection(c.collectionName)
        .find({}, { sort: { seq: 1 }, batchSize: 100 });
      const seen: number[] = [];
      for await (const d of cursor) seen.push(d.seq);
      expect(seen).toEqual(Array.from({ length: 5000 }, (_, i) => i));
      expect(getMores).toBeGreaterThanOrEqual(49);
    } finally {
      await mon.close();
    }
    const limited = await c
      .find({ seq: { $lt: 1000 } })
      .sort({ seq: -1 })
      .skip(10)
      .limit(250)
      .batchSize(100)
      .toArray();
    expect(limited.map((d) => d.seq)).toEqual(Array.from({ length: 250 }, (_, i) => 989 - i));
    const negative = await c.find({}).sort({ seq: 1 }).limit(-5).toArray();
    expect(negative.map((d) => d.seq)).toEqual([0, 1, 2, 3, 4]);
  });

  it('supports keyset paging with $or on (created_at, _id)', async () => {
    const c = coll();
    const base = Date.now();
    // Many documents share a timestamp, so the _id tie-break matters.
    await c.insertMany(Array.from({ length: 1000 }, (_, i) => ({ created_at: new Date(base + (i % 97) * 1000), i })));
    const all = await c.find().sort({ created_at: 1, _id: 1 }).toArray();
    const paged: Document[] = [];
    let last: Document | undefined;
    for (;;) {
      const filter = last
        ? { $or: [{ created_at: { $gt: last.created_at } }, { created_at: last.created_at, _id: { $gt: last._id } }] }
        : {};
      const page = await c.find(filter).sort({ created_at: 1, _id: 1 }).limit(100).toArray();
      if (!page.length) break;
      paged.push(...page);
      last = page[page.length - 1];
    }
    expect(paged.map((d) => d._id.toHexString())).toEqual(all.map((d) => d._id.toHexString()));
    expect(new Set(paged.map((d) => d.i)).size).toBe(1000);
  });

  it('closes cursors early with killCursors', async () => {
    const c = coll();
    await c.insertMany(Array.from({ length: 300 }, (_, i) => ({ i })));
    const cursor = c.find({}).batchSize(10);
    expect(await cursor.next()).toMatchObject({ i: 0 });
    await cursor.close();
    const res = await db.command({ find: c.collectionName, batchSize: 2 });
    const killed = await db.command({ killCursors: c.collectionName, cursors: [res.cursor.id] });
    expect(killed.cursorsKilled).toHaveLength(1);
    const again = await db.command({ killCursors: c.collectionName, cursors: [res.cursor.id] });
    expect(again.cursorsNotFound).toHaveLength(1);
  });
});

describe('queries and aggregation', () => {
  it('aggregates with $match/$group/$sort and friends', async () => {
    const c = coll();
    await c.insertMany([
      { team: 'a', pts: 3, tags: ['x', 'y'] },
      { team: 'b', pts: 5, tags: ['x'] },
      { team: 'a', pts: 4, tags: [] },
      { team: 'c', pts: 1, tags: ['z'] },
    ]);
    const grouped = await c
      .aggregate([
        { $match: { pts: { $gte: 2 } } },
        { $group: { _id: '$team', total: { $sum: '$pts' }, n: { $sum: 1 } } },
        { $sort: { total: -1 } },
      ])
      .toArray();
    expect(grouped).toEqual([
      { _id: 'a', total: 7, n: 2 },
      { _id: 'b', total: 5, n: 1 },
    ]);
    const unwound = await c
      .aggregate([
        { $unwind: '$tags' },
        { $addFields: { t: '$tags' } },
        { $project: { _id: 0, t: 1 } },
        { $sort: { t: 1 } },
        { $skip: 1 },
        { $limit: 2 },
      ])
      .toArray();
    expect(unwound).toEqual([{ t: 'x' }, { t: 'y' }]);
    expect(await c.aggregate([{ $match: { team: 'a' } }, { $count: 'n' }]).toArray()).toEqual([{ n: 2 }]);
    // The aggregation must not mutate stored documents.
    await c.aggregate([{ $set: { 'nested.x': 1, team: 'zzz' } }]).toArray();
    expect(await c.countDocuments({ team: 'zzz' })).toBe(0);
  });

  it('counts, estimates and distincts', async () => {
    const c = coll();
    await c.insertMany([{ k: 1, tags: ['a', 'b'] }, { k: 2, tags: ['b'] }, { k: 2 }, { k: null }]);
    expect(await c.countDocuments()).toBe(4);
    expect(await c.countDocuments({ k: 2 })).toBe(2);
    expect(await c.countDocuments({}, { skip: 1, limit: 2 })).toBe(2);
    expect(await c.estimatedDocumentCount()).toBe(4);
    expect((await c.distinct('k')).sort()).toEqual([1, 2, null].sort());
    expect((await c.distinct('tags', { k: { $in: [1, 2] } })).sort()).toEqual(['a', 'b']);
    expect(await coll().estimatedDocumentCount()).toBe(0);
  });

  it('matches null equality as MongoDB does: null, missing, or an array holding null', async () => {
    const c = coll();
    await c.insertMany([
      { _id: 1 as never, k: 'a', gone: null },
      { _id: 2 as never, k: 'a' },
      { _id: 3 as never, k: 'a', gone: 'x' },
      { _id: 4 as never, k: 'a', gone: [null, 1] },
      { _id: 5 as never, k: 'a', gone: [1] },
      { _id: 6 as never, k: 'b', gone: null },
    ]);
    const ids = async (filter: Document) =>
      (await c.find(filter).toArray()).map((doc) => Number(doc._id)).sort((x, y) => x - y);
    expect(await ids({ k: 'a', gone: null })).toEqual([1, 2, 4]);
    expect(await ids({ _id: 2 as never, gone: null })).toEqual([2]);
    expect(await ids({ _id: 3 as never, gone: null })).toEqual([]);
    expect(await ids({ gone: null, k: 'b' })).toEqual([6]);
    // Filters on other operators and on $expr, each compiled the way the stand-in picks for them.
    expect(await ids({ k: 'a', gone: { $size: 2 } })).toEqual([4]);
    expect(await ids({ k: 'a', $expr: { $eq: ['$gone', 'x'] } })).toEqual([3]);
  });

  it('projects with inclusion and exclusion', async () => {
    const c = coll();
    await c.insertOne({ _id: 1 as never, a: 1, b: { c: 2, d: 3 }, e: [1, 2, 3] });
    expect(await c.findOne({}, { projection: { a: 1 } })).toEqual({ _id: 1, a: 1 });
    expect(await c.findOne({}, { projection: { 'b.c': 1, _id: 0 } })).toEqual({ b: { c: 2 } });
    expect(await c.findOne({}, { projection: { b: 0, e: 0 } })).toEqual({ _id: 1, a: 1 });
  });

  it('round-trips BSON types and compares ObjectIds and Dates correctly', async () => {
    const c = coll();
    const ids = [new ObjectId(), new ObjectId(), new ObjectId()] as const;
    const dates = [
      new Date('2024-03-01T00:00:00Z'),
      new Date('2023-01-01T00:00:00Z'),
      new Date('2025-06-01T12:00:00Z'),
    ] as const;
    const big = Long.fromString('1152921504606846976');
    await c.insertMany([
      {
        _id: ids[1],
        at: dates[0],
        n: Long.fromNumber(42),
        big,
        dec: Decimal128.fromString('12.345'),
        nested: { deep: { arr: [1, { x: 'y' }] } },
        bin: new Binary(Buffer.from('hi')),
        nil: null,
      },
      { _id: ids[0], at: dates[1] },
      { _id: ids[2], at: dates[2], ref: ids[0] },
    ]);
    const doc = await c.findOne({ _id: new ObjectId(ids[1].toHexString()) });
    expect(doc!.at).toEqual(dates[0]);
    expect(doc!.n).toBe(42);
    expect(doc!.big).toEqual(big);
    expect(doc!.dec).toBeInstanceOf(Decimal128);
    expect(doc!.dec.toString()).toBe('12.345');
    expect(doc!.nested).toEqual({ deep: { arr: [1, { x: 'y' }] } });
    expect(Buffer.from(doc!.bin.buffer).toString()).toBe('hi');
    expect(doc!.nil).toBeNull();
    expect(await c.countDocuments({ _id: { $in: [ids[0], ids[2]] } })).toBe(2);
    expect(await c.countDocuments({ ref: ids[0] })).toBe(1);
    expect(await c.countDocuments({ ref: { $in: [new ObjectId(ids[0].toHexString()), ids[1]] } })).toBe(1);
    expect(await c.countDocuments({ ref: { $nin: [ids[0]] } })).toBe(2);
    expect(await c.countDocuments({ at: { $gte: new Date('2024-01-01T00:00:00Z') } })).toBe(2);
    expect(await c.countDocuments({ dec: Decimal128.fromString('12.345') })).toBe(1);
    const byId = await c.find().sort({ _id: 1 }).toArray();
    expect(byId.map((d) => d._id.toHexString())).toEqual(ids.map((i) => i.toHexString()));
    const byDate = await c.find().sort({ at: -1 }).toArray();
    expect(byDate.map((d) => d.at.getTime())).toEqual([dates[2], dates[0], dates[1]].map((d) => d.getTime()));
  });
});

describe('indexes and collections', () => {
  it('lists and drops indexes', async () => {
    const c = coll();
    await c.createIndex({ a: 1, b: -1 });
    await c.createIndexes([{ key: { c: 1 }, name: 'c_idx', unique: true }]);
    expect(await c.createIndex({ a: 1, b: -1 })).toBe('a_1_b_-1');
    const idx = await c.listIndexes().toArray();
    expect(idx.map((i) => i.name)).toEqual(['_id_', 'a_1_b_-1', 'c_idx']);
    expect(idx[0]).toMatchObject({ v: 2, key: { _id: 1 }, name: '_id_' });
    expect(idx[2]).toMatchObject({ key: { c: 1 }, unique: true });
    await c.dropIndex('a_1_b_-1');
    expect((await c.listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_', 'c_idx']);
    expect((await expectServerError(c.dropIndex('nope'))).code).toBe(27);
    expect((await expectServerError(c.dropIndex('_id_'))).code).toBe(72);
    await c.dropIndexes();
    expect((await c.listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_']);
  });

  it('lists, creates and drops collections and databases', async () => {
    const other = client.db(`${dbName}_x`);
    await other.createCollection('explicit');
    await other.collection('implicit').insertOne({ a: 1 });
    const names = (await other.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
    expect(names).toEqual(['explicit', 'implicit']);
    const filtered = await other.listCollections({ name: 'implicit' }).toArray();
    expect(filtered).toHaveLength(1);
    expect(filtered[0]).toMatchObject({ name: 'implicit', type: 'collection' });
    expect((await expectServerError(other.createCollection('explicit'))).code).toBe(48);
    expect(await other.collection('implicit').drop()).toBe(true);
    expect((await other.listCollections().toArray()).map((c) => c.name)).toEqual(['explicit']);
    const dbs = await client.db('admin').admin().listDatabases();
    expect(dbs.databases.map((d) => d.name)).toContain(`${dbName}_x`);
    expect(await other.dropDatabase()).toBe(true);
    expect(await other.listCollections().toArray()).toEqual([]);
  });
});

describe('errors', () => {
  it('answers unknown commands with code 59', async () => {
    const err = await expectServerError(db.command({ definitelyNotACommand: 1 }));
    expect(err.code).toBe(59);
    expect(err.codeName).toBe('CommandNotFound');
  });

  it('never commits a transaction on a standalone server', async () => {
    const hello = await db.admin().command({ hello: 1 });
    const standalone = !hello.setName && hello.msg !== 'isdbgrid';
    const c = coll();
    await c.insertOne({ seed: true }); // create the collection outside the transaction
    const session = client.startSession();
    try {
      const attempt = session.withTransaction(async () => {
        await c.insertOne({ inTxn: true }, { session });
      });
      // A real replica set (MONGO_URL) commits; a standalone, like the stand-in, must refuse.
      if (standalone) await expect(attempt).rejects.toThrow(/Transaction numbers|retryable writes/);
      else await attempt;
    } finally {
      await session.endSession();
    }
    expect(await c.countDocuments({ inTxn: true })).toBe(standalone ? 0 : 1);
  });

  it('rejects startTransaction with IllegalOperation (code 20)', async () => {
    const hello = await db.admin().command({ hello: 1 });
    if (hello.setName || hello.msg === 'isdbgrid') return;
    const c = coll();
    const err = await expectServerError(
      db.command({
        insert: c.collectionName,
        documents: [{ a: 1 }],
        txnNumber: Long.fromNumber(1),
        startTransaction: true,
        autocommit: false,
      }),
    );
    expect(err.code).toBe(20);
    expect(await c.countDocuments()).toBe(0);
  });
});

describe.skipIf(isReal)('stand-in specifics', () => {
  it('describes a standalone 7.0 server', async () => {
    const hello = await db.admin().command({ hello: 1 });
    expect(hello).toMatchObject({
      isWritablePrimary: true,
      helloOk: true,
      maxWireVersion: 21,
      minWireVersion: 0,
      logicalSessionTimeoutMinutes: 30,
      ok: 1,
    });
    expect(hello).not.toHaveProperty('setName');
    expect(hello).not.toHaveProperty('msg');
    const info = await db.admin().command({ buildInfo: 1 });
    expect(info.version).toMatch(/^7\.0\.0/);
    expect(info.versionArray).toEqual([7, 0, 0, 0]);
  });

  it('rejects unsupported options instead of answering wrongly', async () => {
    const c = coll();
    await c.insertOne({ a: 'A' });
    expect(
      (await expectServerError(c.find({ a: 'a' }, { collation: { locale: 'en', strength: 2 } }).toArray())).code,
    ).toBe(238);
    expect((await expectServerError(c.find({ $where: 'this.a' } as never).toArray())).code).toBe(238);
    expect((await expectServerError(c.aggregate([{ $out: 'x' }]).toArray())).code).toBe(238);
    expect((await expectServerError(c.createIndex({ a: 'text' }))).code).toBe(238);
    expect((await expectServerError(db.command({ find: c.collectionName, bogusOption: 1 }))).code).toBe(40415);
    expect(await c.find({ a: 'A' }, { collation: { locale: 'simple' } }).toArray()).toHaveLength(1);
  });

  it('answers lookups by _id and by the leading fields of an index from its maps, without a scan', async () => {
    // In process: what the wire cannot show (on a loaded machine a round trip costs more than a scan).
    const store = new Store();
    const stored = store.ensure('db', 'c');
    stored.addIndex(normaliseSpec({ key: { email: 1 }, name: 'email_1', unique: true }));
    for (let i = 0; i < 20_000; i++) stored.insert({ _id: i, email: `u${i}@x`, group: i % 10 });
    expect([...stored.candidates({ _id: 37 })].map((d) => d._id)).toEqual([37]);
    expect([...stored.candidates({ email: 'u53@x', group: 3 })].map((d) => d._id)).toEqual([53]);
    expect([...stored.candidates({ email: { $in: ['u1@x', 'u2@x'] } })].map((d) => d._id).sort()).toEqual([1, 2]);
    expect([...stored.candidates({ group: 3 })]).toHaveLength(20_000); // no index: the caller scans

    const c = coll();
    await c.insertMany(Array.from({ length: 2_000 }, (_, i) => ({ _id: i as never, group: i % 10 })));
    const top = await c.find({ group: 3 }).sort({ _id: -1 }).limit(3).toArray();
    expect(top.map((d) => d._id)).toEqual([1_993, 1_983, 1_973]);
  });

  it('builds an index map at its first lookup and keeps it through later inserts, updates and removes', () => {
    const store = new Store();
    const stored = store.ensure('db', 'c');
    stored.addIndex(normaliseSpec({ key: { company: 1, tags: 1, _id: 1 }, name: 'company_tags' }));
    stored.addIndex(normaliseSpec({ key: { company: 1 }, name: 'company' }));
    for (let i = 0; i < 1_000; i++) stored.insert({ _id: i, company: `c${i % 4}`, tags: [`t${i % 3}`, 'all'] });
    const ids = (filter: Doc) => [...stored.candidates(filter)].map((d) => d._id as number).sort((a, b) => a - b);
    const every = (test: (i: number) => boolean) => [...Array(1_000).keys()].filter(test);
    // First lookups: built from the documents stored so far (multikey entries included).
    expect(ids({ company: 'c1', tags: 't2' })).toEqual(every((i) => i % 4 === 1 && i % 3 === 2));
    expect(ids({ company: 'c2' })).toHaveLength(250);
    expect(ids({ company: { $in: [] } })).toEqual([]); // matches nothing, from the index without a scan

    stored.insert({ _id: 1_000, company: 'c1', tags: ['t2'] });
    const moved = must([...stored.candidates({ _id: 5 })][0], 'document 5');
    stored.replace(keyOf(5), { ...moved, company: 'c2', tags: ['t0'] }, new Set(['company', 'tags'])); // was c1 / t2
    stored.remove(keyOf(9)); // c1, t0
    expect(ids({ company: 'c1', tags: 't2' })).toEqual([...every((i) => i % 4 === 1 && i % 3 === 2 && i !== 5), 1_000]);
    expect(ids({ company: 'c1', tags: 'all' })).toEqual(every((i) => i % 4 === 1 && i !== 5 && i !== 9));
    expect(ids({ company: 'c2' })).toEqual([...every((i) => i % 4 === 2), 5].sort((a, b) => a - b));
    // A parallel-array document is refused even by an index no lookup has used yet.
    stored.addIndex(normaliseSpec({ key: { tags: 1, other: 1 }, name: 'unused' }));
    expect(() => stored.insert({ _id: 2_000, tags: ['a', 'b'], other: [1, 2] })).toThrow(/parallel arrays/);
  });
});

// The CLI is part of the stand-in, so it is exercised in both modes.
describe('CLI', () => {
  let child: ChildProcess | undefined;

  // npx does not forward signals to its children, so the CLI runs in its own
  // process group and the whole group is signalled.
  const stopGroup = async (): Promise<void> => {
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child!.once('exit', r));
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      return;
    }
    await exited;
  };

  afterAll(stopGroup);

  it('starts, serves the driver and stops on SIGTERM', async () => {
    const port = await freePort();
    child = spawn('npx', ['tsx', 'src/dev/mongo-standin/cli.ts', '--port', String(port)], {
      cwd: process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const ready = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`CLI not ready: ${out} ${stderr}`)), 20_000);
      child!.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.startsWith('ready '));
        if (line) {
          clearTimeout(timer);
          resolve(line.trim());
        }
      });
      child!.once('exit', (code) => reject(new Error(`CLI exited early with ${code}: ${stderr}`)));
    });
    expect(ready).toBe(`ready mongodb://127.0.0.1:${port}`);
    expect(stderr).toContain('for development and tests only');

    const cli = new MongoClient(ready.slice('ready '.length));
    try {
      const c = cli.db('cli_test').collection('things');
      await c.createIndex({ key: 1 }, { unique: true });
      await c.insertMany(Array.from({ length: 250 }, (_, i) => ({ key: `k${i}`, n: i })));
      const dup = await expectServerError(c.insertOne({ key: 'k1' }));
      expect(dup.code).toBe(11000);
      const updated = await c.findOneAndUpdate({ key: 'k7', n: 7 }, { $inc: { n: 100 } }, { returnDocument: 'after' });
      expect(updated).toMatchObject({ key: 'k7', n: 107 });
      const seen: number[] = [];
      for await (const d of c.find({}, { sort: { n: 1 }, batchSize: 40 })) seen.push(d.n);
      expect(seen).toHaveLength(250);
      expect(seen[seen.length - 1]).toBe(249);
    } finally {
      await cli.close();
    }
    await stopGroup();
    // The server process is gone once nothing listens on the port any more.
    const deadline = Date.now() + 5000;
    while ((await canConnect(port)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await canConnect(port)).toBe(false);
  }, 30_000);
});

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
