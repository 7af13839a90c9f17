// MongoDB round trips per request on the happy path, counted with the driver's command monitoring
// (one command = one network round trip; a bulk write of many documents is one command). Not timed:
// it counts, so a change that adds a trip to one of these routes fails here. `npm run bench` reports
// the same counts for the real web process (its "MongoDB round trips" rows).
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { ensureIndexes } from '../../src/repositories.js';
import { onMongoCommand, type SentCommand } from '../../src/shared/mongo-commands.js';
import { connectMongo, type MongoConnection } from '../../src/shared/mongo.js';
import { createRequestPathRedis, type RedisClient } from '../../src/shared/redis.js';
import { testConfig } from '../helpers/app.js';
import { feedOf } from '../helpers/events.js';
import { createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import type { QueueEventPublisher } from '../../src/events/queue-publisher.js';
import type { Config } from '../../src/shared/config.js';

let config: Config;
let mongo: MongoConnection;
let redis: RedisClient;
let publisher: QueueEventPublisher;
let app: App;
let tenant: Tenant;
const sent: SentCommand[] = [];
/** Off while the test itself reads MongoDB. */
let recording = true;

beforeAll(async () => {
  config = testConfig({ RATE_LIMIT_MAX: '1000000' });
  mongo = await connectMongo(config.MONGO_URL!, config.MONGO_DB, 5_000, { monitorCommands: true });
  redis = createRequestPathRedis(config.REDIS_URL);
  redis.on('error', () => {});
  await ensureIndexes(mongo.db);
  // The production fast path: events are moved out of the outbox right after each write.
  publisher = createEventPublisher(
    mongo.db,
    { connection: redis, prefix: config.QUEUE_PREFIX },
    pino({ level: 'silent' }),
  );
  app = await buildApp({ config, db: mongo.db, redis, publisher });
  await app.ready();
  tenant = await createTenant(app, { fields: [{ name: 'deal_value', type: 'number' }] });
  onMongoCommand(mongo.client, (command) => recording && sent.push(command));
});

afterAll(async () => {
  await app?.close();
  await publisher?.close();
  await mongo?.db.dropDatabase().catch(() => {});
  await mongo?.client.close();
  redis?.disconnect();
});

/** Moving events out of a document's outbox after the response: recording them, then clearing the outbox. */
const isOutboxMove = (command: SentCommand) =>
  (command.name === 'insert' && command.collection === 'events') ||
  (command.name === 'update' && (command.collection === 'items' || command.collection === 'tasks'));
/** Written in the background at most once per interval per key (last_used_at), not by the request. */
const isBackground = (command: SentCommand) =>
  (command.collection === 'api_keys' && command.name === 'update') || isSequencer(command);
/**
 * The event sequencer's own work (its lease, the companies' positions, sequencing events, the record history it
 * writes with each batch): never a request's.
 */
const isSequencer = (command: SentCommand) =>
  ['event_sequencer', 'event_sequences', 'record_history'].includes(command.collection) ||
  (command.collection === 'events' && command.name !== 'insert');

/**
 * Reloads of records the process caches for a few seconds (the API key, its company, the pipeline):
 * once per cache lifetime, not per request, but a slow machine can make one fall inside a count.
 */
const isCacheRefresh = (command: SentCommand) =>
  command.name === 'find' && ['api_keys', 'companies', 'pipelines'].includes(command.collection);

const describeCommands = (commands: SentCommand[]) => commands.map((c) => `${c.name} ${c.collection}`).sort();

/**
 * Runs `requests` sequentially (each after the previous one's events left the outbox) and returns
 * the commands each request sent on its path, and those of the outbox moves, in total.
 */
async function count(requests: number, send: (index: number) => Promise<{ statusCode: number; body: string }>) {
  await publisher.settled(); // nothing of earlier requests still under way
  sent.length = 0;
  for (let index = 0; index < requests; index++) {
    const response = await send(index);
    expect(response.statusCode, response.body).toBeLessThan(300);
    await publisher.settled();
  }
  const own = sent.filter((command) => !isBackground(command));
  const refreshes = own.filter(isCacheRefresh);
  // At most one reload per cached record within a count: more would mean a read per request.
  expect(refreshes.length, describeCommands(refreshes).join(', ')).toBeLessThanOrEqual(3);
  return {
    path: own.filter((command) => !isOutboxMove(command) && !isCacheRefresh(command)),
    outbox: own.filter(isOutboxMove),
  };
}

const newItem = (name: string, extra: object = {}) =>
  ext(app, tenant.key, 'POST', '/items', {
    name,
    pipeline_id: tenant.pipelineId,
    stage_id: tenant.stageIds[0],
    ...extra,
  });
const newTask = (extra: object = {}) =>
  ext(app, tenant.key, 'POST', '/tasks', { title: 'Call back', due_at: '2031-01-15T09:30:00Z', ...extra });

describe('MongoDB round trips per request on the happy path', () => {
  const itemIds: string[] = [];

  beforeAll(async () => {
    // Warm-up: authentication, pipeline and cursor secret cached, the first short_id block taken.
    for (let index = 0; index < 5; index++) {
      const response = await newItem(`Warm-up ${index}`);
      expect(response.statusCode, response.body).toBe(201);
      itemIds.push(response.json<{ item_id: string }>().item_id);
    }
    expect((await newTask()).statusCode).toBe(201);
    expect((await ext(app, tenant.key, 'GET', `/items?pipeline_id=${tenant.pipelineId}&limit=2`)).statusCode).toBe(200);
  });

  it('GET item: 1 (the item; its pipeline comes from the process cache)', async () => {
    const { path } = await count(10, (index) => ext(app, tenant.key, 'GET', `/items/${itemIds[index % 5]}`));
    expect(describeCommands(path)).toEqual(Array(10).fill('find items'));
  });

  it('list items: 1 (one find of limit + 1 documents)', async () => {
    const { path } = await count(10, () =>
      ext(app, tenant.key, 'GET', `/items?pipeline_id=${tenant.pipelineId}&limit=3`),
    );
    expect(describeCommands(path)).toEqual(Array(10).fill('find items'));
  });

  it('create item: 1 insert, and short_id numbers taken in blocks (≤ 1.1 with the insert)', async () => {
    const creates = 40;
    const { path, outbox } = await count(creates, (index) => newItem(`Counted ${index}`));
    const inserts = path.filter((command) => command.name === 'insert' && command.collection === 'items');
    const counters = path.filter((command) => command.collection === 'counters');
    expect(inserts).toHaveLength(creates);
    expect(path).toHaveLength(inserts.length + counters.length);
    expect(path.length / creates).toBeLessThanOrEqual(1.1);
    // After the response: its event recorded in `events` and cleared from the outbox, one round trip each.
    expect(describeCommands(outbox)).toEqual(
      [...Array(creates).fill('insert events'), ...Array(creates).fill('update items')].sort(),
    );
  });

  it('create task: 1, also with an assignee and an item (reference checks answered by the cache)', async () => {
    const plain = await count(10, () => newTask());
    expect(describeCommands(plain.path)).toEqual(Array(10).fill('insert tasks'));
    // The first check of each reference reads it; later ones within the cache's lifetime do not.
    expect((await newTask({ assigned_to: tenant.userId, item_id: itemIds[0] })).statusCode).toBe(201);
    const referenced = await count(10, () => newTask({ assigned_to: tenant.userId, item_id: itemIds[0] }));
    expect(describeCommands(referenced.path)).toEqual(Array(10).fill('insert tasks'));
  });

  it('PATCH item with version: 1 (the conditional findOneAndUpdate) after the client read the item', async () => {
    const { path } = await count(10, async (index) => {
      const itemId = itemIds[index % 5]!;
      if (index < 5) {
        // The client's read that told it the version (not counted: it is the GET's trip)
        recording = false;
        const read = await ext(app, tenant.key, 'GET', `/items/${itemId}`);
        expect(read.statusCode).toBe(200);
      }
      recording = false; // the test's own read
      const current = await mongo.db.collection('items').findOne({ _id: itemId as never });
      recording = true;
      return ext(app, tenant.key, 'PATCH', `/items/${itemId}`, {
        name: `Renamed ${index}`,
        version: current!.version as number,
      });
    });
    expect(describeCommands(path)).toEqual(Array(10).fill('findAndModify items'));
  });

  it('a PATCH from the item kept by a GET (its BSON) answers what a read would have: values, types and dates', async () => {
    const created = await newItem('Kept ünïcode ✓', { metadata: { deal_value: 12.5 }, contact_id: 'contact-7' });
    expect(created.statusCode, created.body).toBe(201);
    const itemId = created.json<{ item_id: string }>().item_id;
    const read = await ext(app, tenant.key, 'GET', `/items/${itemId}`);
    const before = read.json<Record<string, unknown> & { version: number }>();
    const { path } = await count(1, () =>
      ext(app, tenant.key, 'PATCH', `/items/${itemId}`, { metadata: { deal_value: 13 }, version: before.version }),
    );
    expect(describeCommands(path)).toEqual(['findAndModify items']); // from the kept item, not a read
    const after = await ext(app, tenant.key, 'GET', `/items/${itemId}`);
    expect(after.json()).toEqual({
      ...before,
      deal_value: 13,
      version: before.version + 1,
      updated_at: after.json<{ updated_at: string }>().updated_at,
    });
  });

  it('outbox: the events of requests answered together leave in one record and one clear', async () => {
    await publisher.settled();
    sent.length = 0;
    const responses = await Promise.all(Array.from({ length: 30 }, () => newTask()));
    for (const response of responses) expect(response.statusCode).toBe(201);
    await publisher.settled();
    const outbox = sent.filter(isOutboxMove);
    const records = outbox.filter((command) => command.collection === 'events').length;
    // One record and one clear per batch, and fewer batches than requests.
    expect(outbox.length).toBe(records * 2);
    expect(records).toBeLessThan(30);
  });
});

describe('what the caches behind those counts keep (DECISIONS.md sections 6 and 8)', () => {
  const read = async (itemId: string) => {
    const response = await ext(app, tenant.key, 'GET', `/items/${itemId}`);
    expect(response.statusCode).toBe(200);
    return response.json<{ item_id: string; name: string; version: number }>();
  };
  /** A write by another process: this one still remembers the item as it read it. */
  const writeElsewhere = (itemId: string, set: object) =>
    mongo.db.collection('items').updateOne({ _id: itemId as never }, { $set: set, $inc: { version: 1 } });

  it('a remembered version that is no longer current still answers 409, for a change and for a no-op', async () => {
    const item = await read((await newItem('Remembered')).json<{ item_id: string }>().item_id);
    await writeElsewhere(item.item_id, { name: 'Changed elsewhere' });
    const change = await ext(app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'Mine', version: 1 });
    expect(change.statusCode, change.body).toBe(409);
    expect(change.json()).toMatchObject({ code: 'version_conflict', current_version: 2 });
    const noop = await ext(app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: item.name, version: 1 });
    expect(noop.statusCode, noop.body).toBe(409);
    expect((await read(item.item_id)).name).toBe('Changed elsewhere');
  });

  it('an item archived by another process answers 404 to a PATCH with the version remembered here', async () => {
    const item = await read((await newItem('Archived elsewhere')).json<{ item_id: string }>().item_id);
    await writeElsewhere(item.item_id, { archived_at: new Date() });
    const response = await ext(app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'Late', version: 1 });
    expect(response.statusCode, response.body).toBe(404);
  });

  it('a no-op PATCH with the current version changes nothing and records no event', async () => {
    const item = await read((await newItem('Unchanged')).json<{ item_id: string }>().item_id);
    await publisher.settled();
    const response = await ext(app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'Unchanged', version: 1 });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({ version: 1 });
    const stored = await mongo.db.collection('items').findOne({ _id: item.item_id as never });
    expect(stored).toMatchObject({ version: 1 });
    // A change after the no-op: once its event is readable, an event the no-op recorded would be too.
    expect((await ext(app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'Changed' })).statusCode).toBe(200);
    const events = await feedOf(app, tenant.key, item.item_id, 2);
    expect(events.map((event) => [event.type, event.changes?.name?.to])).toEqual([
      ['item.created', undefined],
      ['item.updated', 'Changed'],
    ]);
  });

  it('a task cannot refer to an item this process archived, even right after a check remembered it', async () => {
    const itemId = (await newItem('Soon archived')).json<{ item_id: string }>().item_id;
    expect((await newTask({ item_id: itemId })).statusCode).toBe(201); // remembered as live
    expect((await ext(app, tenant.key, 'DELETE', `/items/${itemId}`)).statusCode).toBe(204);
    const response = await newTask({ item_id: itemId });
    expect(response.statusCode, response.body).toBe(400);
    expect(response.json().errors).toEqual([{ path: 'item_id', message: 'is not an item of this company' }]);
  });
});
