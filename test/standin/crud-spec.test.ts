// MongoDB's own CRUD specification tests (unified format, the ones every official driver runs against real servers),
// run through the Node driver against the stand-in, or against MONGO_URL when set. The tests come from
// ../shared/mongo-spec/crud (or MONGO_SPEC_DIR); a clone without them skips this file.
//
// Each spec test ends as one of: pass; refused (the stand-in answered NotImplemented, a clean refusal of a feature it
// does not have); skipped (cannot hold on a single 7.0 standalone through this driver: other topologies or versions,
// failPoints, sessions, clientBulkWrite); diverged (anything else: a real difference from MongoDB, which fails).

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type AnyBulkWriteOperation,
  Binary,
  BSON,
  type Collection,
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
import { must } from '../../src/shared/must.js';

const { EJSON } = BSON;

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
/** The repository's sibling shared/ (a worktree under wt/<name> has it two levels up). */
const specDir = [
  process.env.MONGO_SPEC_DIR,
  join(root, '../shared/mongo-spec/crud'),
  join(root, '../../shared/mongo-spec/crud'),
]
  .filter((dir): dir is string => !!dir)
  .find((dir) => existsSync(dir));

type Outcome = 'pass' | 'refused' | 'skipped' | 'diverged';
const tally: Record<Outcome, number> = { pass: 0, refused: 0, skipped: 0, diverged: 0 };

/** Spec tests that fail on a real server too, because of what the Node driver itself does. */
const DRIVER_BEHAVIOUR: Record<string, string> = {
  'inserting _id with type null via insertOne': 'the Node driver replaces a null _id with a new ObjectId',
  'inserting _id with type null via insertMany': 'the Node driver replaces a null _id with a new ObjectId',
  'inserting _id with type null via bulkWrite': 'the Node driver replaces a null _id with a new ObjectId',
};
const UNSUPPORTED_OPERATIONS: Record<string, string> = {
  failPoint: 'failPoints need a test-enabled server',
  clientBulkWrite: 'clientBulkWrite needs MongoDB 8.0',
  createChangeStream: 'change streams need a replica set',
};

interface SpecFile {
  description: string;
  runOnRequirements?: Requirement[];
  createEntities: Document[];
  initialData?: Array<{
    collectionName: string;
    databaseName: string;
    documents: Document[];
    createOptions?: Document;
  }>;
  tests: SpecTest[];
}
interface SpecTest {
  description: string;
  runOnRequirements?: Requirement[];
  skipReason?: string;
  operations: Operation[];
  outcome?: Array<{ collectionName: string; databaseName: string; documents: Document[] }>;
}
interface Operation {
  name: string;
  object: string;
  arguments?: Document;
  expectResult?: unknown;
  expectError?: Document;
}
interface Requirement {
  minServerVersion?: string;
  maxServerVersion?: string;
  topologies?: string[];
  serverless?: string;
  auth?: boolean;
  csfle?: unknown;
  serverParameters?: Document;
}

const REAL_URL = process.env.MONGO_URL;
let uri: string;
let stopStandin: (() => Promise<void>) | undefined;
let server: { version: number[]; topology: string };

beforeAll(async () => {
  if (REAL_URL) uri = REAL_URL;
  else {
    const standin = await startMongoStandin({ port: 0, quiet: true });
    uri = standin.uri;
    stopStandin = () => standin.close();
  }
  const client = await MongoClient.connect(uri);
  const info = await client.db('admin').command({ buildInfo: 1 });
  const hello = await client.db('admin').command({ hello: 1 });
  await client.close();
  const topology = hello.setName ? 'replicaset' : hello.msg === 'isdbgrid' ? 'sharded' : 'single';
  server = { version: String(info.version).split(/[.-]/).slice(0, 3).map(Number), topology };
});

afterAll(async () => {
  await stopStandin?.();
  if (specDir) {
    process.stdout.write(
      `crud spec tests on ${REAL_URL ? 'MONGO_URL' : 'the stand-in'}: ${tally.pass} pass, ${tally.refused} refused (NotImplemented), ${tally.skipped} skipped, ${tally.diverged} diverged\n`,
    );
  }
});

function versionAtLeast(actual: number[], wanted: string): boolean {
  const parts = wanted.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const a = actual[i] ?? 0;
    const w = parts[i] ?? 0;
    if (a !== w) return a > w;
  }
  return true;
}

/** Why no requirement in the list holds on this server, or undefined when one does. */
function unmet(requirements: Requirement[] | undefined): string | undefined {
  if (!requirements?.length) return undefined;
  const reasons = requirements.map((r) => {
    if (r.minServerVersion && !versionAtLeast(server.version, r.minServerVersion))
      return `needs server >= ${r.minServerVersion}`;
    if (r.maxServerVersion && !versionAtLeast(parseVersion(r.maxServerVersion), server.version.join('.')))
      return `needs server <= ${r.maxServerVersion}`;
    if (r.topologies && !r.topologies.includes(server.topology)) return `needs topology ${r.topologies.join('/')}`;
    if (r.serverless === 'require') return 'needs serverless';
    if (r.auth === true) return 'needs auth';
    if (r.csfle) return 'needs CSFLE';
    if (r.serverParameters) return 'needs server parameters';
    return undefined;
  });
  return reasons.includes(undefined) ? undefined : reasons.join('; ');
}

function parseVersion(text: string): number[] {
  return text.split('.').map(Number);
}

/** Why this driver cannot run the test on a standalone, or undefined. */
function unsupported(file: SpecFile, test: SpecTest): string | undefined {
  if (DRIVER_BEHAVIOUR[test.description]) return DRIVER_BEHAVIOUR[test.description];
  if (test.skipReason) return test.skipReason;
  if (file.createEntities.some((e) => e.session)) return 'sessions';
  if (file.createEntities.some((e) => e.client?.useMultipleMongoses)) return 'multiple mongoses';
  for (const op of test.operations) {
    if (UNSUPPORTED_OPERATIONS[op.name]) return UNSUPPORTED_OPERATIONS[op.name];
    if (op.arguments?.session) return 'sessions';
  }
  return unmet(file.runOnRequirements) ?? unmet(test.runOnRequirements);
}

// ---------------------------------------------------------------------------------------------------------------
// Entities and operations

interface Entities {
  clients: MongoClient[];
  byId: Map<string, MongoClient | Db | Collection>;
}

async function createEntities(file: SpecFile): Promise<Entities> {
  const entities: Entities = { clients: [], byId: new Map() };
  for (const entity of file.createEntities) {
    if (entity.client) {
      const c = entity.client;
      const client = new MongoClient(uri, { serverSelectionTimeoutMS: 5_000, ...(c.uriOptions ?? {}) });
      await client.connect();
      entities.clients.push(client);
      entities.byId.set(c.id, client);
    } else if (entity.database) {
      const d = entity.database;
      const client = entities.byId.get(d.client) as MongoClient;
      entities.byId.set(d.id, client.db(d.databaseName, d.databaseOptions));
    } else if (entity.collection) {
      const c = entity.collection;
      const db = entities.byId.get(c.database) as Db;
      entities.byId.set(c.id, db.collection(c.collectionName, c.collectionOptions));
    }
  }
  return entities;
}

async function loadInitialData(client: MongoClient, file: SpecFile): Promise<void> {
  for (const data of file.initialData ?? []) {
    const db = client.db(data.databaseName);
    await db.dropCollection(data.collectionName).catch(() => undefined);
    if (data.createOptions || data.documents.length === 0) {
      await db.createCollection(data.collectionName, data.createOptions ?? {});
    }
    if (data.documents.length) await db.collection(data.collectionName).insertMany(data.documents);
  }
}

function options(args: Document, ...leave: string[]): Document {
  const out: Document = {};
  for (const [k, v] of Object.entries(args)) if (!leave.includes(k)) out[k] = v;
  if (typeof out.returnDocument === 'string') out.returnDocument = out.returnDocument.toLowerCase();
  return out;
}

function bulkRequests(requests: Document[]): AnyBulkWriteOperation[] {
  return requests.map((request) => {
    const kind = Object.keys(request)[0] ?? '';
    const args = request[kind];
    return { [kind]: kind === 'insertOne' ? { document: args.document } : args } as AnyBulkWriteOperation;
  });
}

async function runOperation(entities: Entities, op: Operation): Promise<unknown> {
  const target = entities.byId.get(op.object);
  const args = op.arguments ?? {};
  if (!target) throw new Error(`unknown entity ${op.object}`);
  if (target instanceof MongoClient) throw new Error(`client operation ${op.name}`);
  if (!('collectionName' in target)) {
    const db = target;
    switch (op.name) {
      case 'aggregate':
        return db.aggregate(args.pipeline, options(args, 'pipeline')).toArray();
      case 'dropCollection':
        return db.dropCollection(args.collection);
      case 'createCollection':
        return db.createCollection(args.collection, options(args, 'collection')).then(() => undefined);
      case 'modifyCollection':
        return db.command({ collMod: args.collection, ...options(args, 'collection') });
      case 'runCommand':
        return db.command(args.command);
    }
    throw new Error(`database operation ${op.name}`);
  }
  const coll = target;
  switch (op.name) {
    case 'insertOne':
      return coll.insertOne(args.document, options(args, 'document'));
    case 'insertMany':
      return coll.insertMany(args.documents, options(args, 'documents'));
    case 'updateOne':
      return coll.updateOne(args.filter, args.update, options(args, 'filter', 'update'));
    case 'updateMany':
      return coll.updateMany(args.filter, args.update, options(args, 'filter', 'update'));
    case 'replaceOne':
      return coll.replaceOne(args.filter, args.replacement, options(args, 'filter', 'replacement'));
    case 'deleteOne':
      return coll.deleteOne(args.filter, options(args, 'filter'));
    case 'deleteMany':
      return coll.deleteMany(args.filter, options(args, 'filter'));
    case 'find':
      return coll.find(args.filter, options(args, 'filter')).toArray();
    case 'findOne':
      return coll.findOne(args.filter, options(args, 'filter'));
    case 'aggregate':
      return coll.aggregate(args.pipeline, options(args, 'pipeline')).toArray();
    case 'countDocuments':
      return coll.countDocuments(args.filter, options(args, 'filter'));
    case 'count':
      return coll.count(args.filter, options(args, 'filter'));
    case 'estimatedDocumentCount':
      return coll.estimatedDocumentCount(options(args));
    case 'distinct':
      return coll.distinct(args.fieldName, args.filter, options(args, 'fieldName', 'filter'));
    case 'bulkWrite':
      return coll.bulkWrite(bulkRequests(args.requests), options(args, 'requests'));
    case 'findOneAndUpdate':
      return coll.findOneAndUpdate(args.filter, args.update, options(args, 'filter', 'update'));
    case 'findOneAndReplace':
      return coll.findOneAndReplace(args.filter, args.replacement, options(args, 'filter', 'replacement'));
    case 'findOneAndDelete':
      return coll.findOneAndDelete(args.filter, options(args, 'filter'));
    case 'createIndex':
      return coll.createIndex(args.keys, options(args, 'keys'));
  }
  throw new Error(`collection operation ${op.name}`);
}

// ---------------------------------------------------------------------------------------------------------------
// Matching (the unified format's rules: extra fields allowed in results, not in collection outcomes)

class Mismatch extends Error {}

function numeric(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (Long.isLong(v)) return v.toNumber();
  const t = (v as { _bsontype?: string } | null)?._bsontype;
  if (t === 'Int32' || t === 'Double') return Number((v as { value: number }).value);
  return undefined;
}

const TYPE_CHECKS: Record<string, (v: unknown) => boolean> = {
  double: (v) => typeof v === 'number',
  int: (v) => typeof v === 'number' && Number.isInteger(v),
  long: (v) => (typeof v === 'number' && Number.isInteger(v)) || Long.isLong(v),
  string: (v) => typeof v === 'string',
  object: (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
  array: (v) => Array.isArray(v),
  bool: (v) => typeof v === 'boolean',
  date: (v) => v instanceof Date,
  null: (v) => v === null,
  objectId: (v) => v instanceof ObjectId,
  binData: (v) => v instanceof Binary,
};

function match(actual: unknown, expected: unknown, path: string, extraFields: boolean): void {
  if (expected !== null && typeof expected === 'object' && !Array.isArray(expected) && isPlain(expected)) {
    const e = expected as Document;
    const [first] = Object.keys(e);
    if (first?.startsWith('$$')) return special(actual, e, first, path, extraFields);
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual))
      throw new Mismatch(`${path}: expected a document, got ${show(actual)}`);
    const a = actual as Document;
    for (const [key, value] of Object.entries(e)) {
      const isUnset = value && typeof value === 'object' && ('$$unsetOrMatches' in value || '$$exists' in value);
      if (!(key in a) && !isUnset) throw new Mismatch(`${path}.${key}: missing`);
      match(a[key], value, `${path}.${key}`, extraFields);
    }
    if (!extraFields) {
      const extra = Object.keys(a).filter((k) => !(k in e));
      if (extra.length) throw new Mismatch(`${path}: unexpected fields ${extra.join(', ')} in ${show(actual)}`);
    }
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length)
      throw new Mismatch(`${path}: expected ${show(expected)}, got ${show(actual)}`);
    expected.forEach((value, i) => match(actual[i], value, `${path}[${i}]`, extraFields));
    return;
  }
  const [a, e] = [numeric(actual), numeric(expected)];
  if (a !== undefined && e !== undefined) {
    if (a === e || (Number.isNaN(a) && Number.isNaN(e))) return;
  } else if (same(actual, expected)) return;
  throw new Mismatch(`${path}: expected ${show(expected)}, got ${show(actual)}`);
}

function special(actual: unknown, e: Document, op: string, path: string, extraFields: boolean): void {
  switch (op) {
    case '$$unsetOrMatches':
      if (actual === undefined) return;
      return match(actual, e.$$unsetOrMatches, path, extraFields);
    case '$$exists':
      if ((actual !== undefined) !== e.$$exists)
        throw new Mismatch(`${path}: expected ${e.$$exists ? 'a value' : 'no value'}, got ${show(actual)}`);
      return;
    case '$$type': {
      const types: string[] = Array.isArray(e.$$type) ? e.$$type : [e.$$type];
      if (!types.some((t) => TYPE_CHECKS[t]?.(actual)))
        throw new Mismatch(`${path}: ${show(actual)} is not ${types.join('|')}`);
      return;
    }
    case '$$matchAsRoot':
      return match(actual, e.$$matchAsRoot, path, true);
    case '$$matchAsDocument':
      return match(EJSON.parse(String(actual)), e.$$matchAsDocument, path, extraFields);
    case '$$lte':
      if (!(typeof actual === 'number' && actual <= e.$$lte))
        throw new Mismatch(`${path}: ${show(actual)} > ${e.$$lte}`);
      return;
  }
  throw new Error(`matching operator ${op} is not implemented by this runner`);
}

function isPlain(v: object): boolean {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function same(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  if (a && b && typeof a === 'object' && typeof b === 'object') return EJSON.stringify(a) === EJSON.stringify(b);
  return Object.is(a, b) || a === b;
}

function show(v: unknown): string {
  try {
    return EJSON.stringify(v, { relaxed: true }).slice(0, 300);
  } catch {
    return String(v);
  }
}

/** The driver's result objects as the spec names their fields. */
function resultView(value: unknown): unknown {
  if (value && typeof value === 'object' && value.constructor?.name === 'BulkWriteResult') {
    const r = value as Document;
    return {
      insertedCount: r.insertedCount,
      matchedCount: r.matchedCount,
      modifiedCount: r.modifiedCount,
      deletedCount: r.deletedCount,
      upsertedCount: r.upsertedCount,
      insertedIds: r.insertedIds,
      upsertedIds: r.upsertedIds,
    };
  }
  if (value && typeof value === 'object' && 'upsertedId' in value && (value as Document).upsertedId === null) {
    const { upsertedId: _none, ...rest } = value as Document;
    return rest;
  }
  return value;
}

function checkError(error: unknown, expected: Document): void {
  const server = error instanceof MongoServerError ? error : undefined;
  if (expected.isClientError !== undefined && expected.isClientError !== !server)
    throw new Mismatch(`expected a ${expected.isClientError ? 'client' : 'server'} error, got ${String(error)}`);
  const message = error instanceof Error ? error.message : String(error);
  if (expected.errorContains && !message.toLowerCase().includes(String(expected.errorContains).toLowerCase()))
    throw new Mismatch(`error '${message}' does not contain '${expected.errorContains}'`);
  if (expected.errorCode !== undefined && server?.code !== expected.errorCode)
    throw new Mismatch(`expected error code ${expected.errorCode}, got ${server?.code} (${message})`);
  if (expected.errorCodeName !== undefined && server?.codeName !== expected.errorCodeName)
    throw new Mismatch(`expected ${expected.errorCodeName}, got ${server?.codeName} (${message})`);
  if (expected.errorResponse) match(server?.errorResponse, expected.errorResponse, 'errorResponse', true);
  if (expected.expectResult && error instanceof MongoBulkWriteError)
    match(resultView(error.result), expected.expectResult, 'result', true);
}

function isRefusal(error: unknown): boolean {
  return (
    error instanceof MongoServerError && error.code === 238 && /mongo-standin does not support/.test(error.message)
  );
}

async function runTest(file: SpecFile, test: SpecTest): Promise<Outcome> {
  const entities = await createEntities(file);
  try {
    await loadInitialData(must(entities.clients[0], 'a client'), file);
    for (const op of test.operations) {
      let result: unknown;
      let error: unknown;
      try {
        result = await runOperation(entities, op);
      } catch (e) {
        error = e;
      }
      if (error !== undefined && isRefusal(error)) return 'refused';
      if (op.expectError) {
        if (error === undefined) throw new Mismatch(`${op.name}: expected an error, got ${show(resultView(result))}`);
        checkError(error, op.expectError);
      } else if (error !== undefined) {
        throw error instanceof Error ? error : new Error(JSON.stringify(error));
      } else if (op.expectResult !== undefined) {
        match(resultView(result), op.expectResult, op.name, true);
      }
    }
    for (const expected of test.outcome ?? []) {
      const docs = await must(entities.clients[0], 'a client')
        .db(expected.databaseName)
        .collection(expected.collectionName)
        .find({}, { sort: { _id: 1 } })
        .toArray();
      match(docs, expected.documents, `outcome ${expected.collectionName}`, false);
    }
    return 'pass';
  } finally {
    await Promise.all(entities.clients.map((c) => c.close()));
  }
}

const files: Array<[string, SpecFile]> = specDir
  ? readdirSync(specDir)
      .filter((name) => name.endsWith('.json'))
      .sort()
      .map((name) => [name, EJSON.parse(readFileSync(join(specDir, name), 'utf8'), { relaxed: true }) as SpecFile])
  : [];

describe.skipIf(!specDir)('MongoDB CRUD specification tests', () => {
  for (const [name, file] of files) {
    describe(name, () => {
      for (const test of file.tests) {
        it(test.description, async (context) => {
          const reason = unsupported(file, test);
          if (reason) {
            tally.skipped++;
            context.skip(reason);
          }
          let outcome: Outcome;
          try {
            outcome = await runTest(file, test);
          } catch (e) {
            tally.diverged++;
            throw e;
          }
          tally[outcome]++;
          if (outcome === 'refused') expect(REAL_URL, 'a real server refused with NotImplemented').toBeUndefined();
        });
      }
    });
  }
});
