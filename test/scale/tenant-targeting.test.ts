import { MongoClient, type CommandStartedEvent, type Db, type Document } from 'mongodb';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { ensureIndexes } from '../../src/repositories.js';
import { createRequestPathRedis, type RedisClient } from '../../src/shared/redis.js';
import { startWorkers } from '../../workers/start.js';
import { testConfig } from '../helpers/app.js';
import { EXT_ROUTES, seedResources } from '../helpers/ext-routes.js';
import { admin, createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from '../hooks/receiver.js';
import type { QueueEventPublisher } from '../../src/events/queue-publisher.js';

/**
 * On a sharded MongoDB (shard key led by company_id, docs/scaling.md) a query without company_id
 * goes to every shard. This test watches every command the web app and the workers send while the
 * whole external API and every worker role run, and fails on any read or write of a tenant
 * collection whose filter lacks company_id, except the few global ones named below.
 */
const TENANT_COLLECTIONS = new Set([
  'items',
  'tasks',
  'pipelines',
  'users',
  'hooks',
  'deliveries',
  'webhook_secrets',
  'automations',
  'automation_runs',
  'api_keys',
  'events',
  'record_history',
  'erasures',
]);

/** Sharded on _id (docs/scaling.md): a filter with _id is targeted. */
const KEYED_BY_ID = new Set(['companies', 'webhook_secrets', 'idempotency_keys', 'counters', 'app_secrets']);

/** Global by design: each is one query per request/tick/batch, served by its own index. */
const ALLOWED_GLOBAL: Array<{ name: string; matches: (collection: string, filter: Document) => boolean }> = [
  { name: 'API key lookup by hash (authentication)', matches: (c, f) => c === 'api_keys' && 'key_hash' in f },
  {
    name: 'relay scan of the outbox',
    matches: (c, f) => (c === 'items' || c === 'tasks' || c === 'hooks') && 'outbox_pending' in f,
  },
  {
    name: 'hook recovery runners looking for a recovery to drive',
    matches: (c, f) => c === 'hook_recoveries' && 'lease_until' in f,
  },
  { name: 'overdue scanner scan of due tasks', matches: (c, f) => c === 'tasks' && 'overdue_fired_for' in f },
  { name: 'relay scan of events not yet queued', matches: (c, f) => c === 'events' && 'unqueued' in f },
  { name: 'sequencer scan of events not yet sequenced', matches: (c, f) => c === 'events' && 'unsequenced' in f },
  { name: "reconciler scan of a consumer's unfinished events", matches: (c, f) => c === 'events' && 'pending' in f },
  {
    name: 'reconciler scan of deliveries waiting for an attempt',
    matches: (c, f) => c === 'deliveries' && JSON.stringify(f).includes('next_attempt_at'),
  },
];

interface Seen {
  command: string;
  collection: string;
  filter: Document;
}

function filtersOf(event: CommandStartedEvent): Seen[] {
  const { commandName: command, command: body } = event;
  const collection = String(body[command] ?? '');
  switch (command) {
    case 'find':
    case 'count':
      return [{ command, collection, filter: body.filter ?? body.query ?? {} }];
    case 'distinct':
      return [{ command, collection, filter: body.query ?? {} }];
    case 'findAndModify':
      return [{ command, collection, filter: body.query ?? {} }];
    case 'aggregate': {
      const first = (body.pipeline as Document[] | undefined)?.[0];
      return [{ command, collection, filter: first?.$match ?? {} }];
    }
    case 'update':
      return (body.updates as Document[]).map((update) => ({ command, collection, filter: update.q }));
    case 'delete':
      return (body.deletes as Document[]).map((remove) => ({ command, collection, filter: remove.q }));
    default:
      return [];
  }
}

function hasCompanyId(filter: Document): boolean {
  if (filter.company_id !== undefined) return true;
  const and = filter.$and as Document[] | undefined;
  return Array.isArray(and) && and.some(hasCompanyId);
}

let client: MongoClient;
/** The test's own reads go through a second, unwatched client. */
let checkClient: MongoClient;
let db: Db;
let redis: RedisClient;
let app: Awaited<ReturnType<typeof buildApp>>;
let publisher: QueueEventPublisher;
let workers: { close(): Promise<void> };
let inbox: Receiver;
let tenant: Tenant;
const seen: Seen[] = [];
let recording = false;

beforeAll(async () => {
  const config = testConfig({ RATE_LIMIT_MAX: '1000000', OVERDUE_SCAN_CRON: '* * * * * *', HOOK_BACKOFF_MS: '100' });
  client = new MongoClient(inject('mongoUrl'), { monitorCommands: true });
  client.on('commandStarted', (event) => {
    if (recording) seen.push(...filtersOf(event));
  });
  await client.connect();
  db = client.db(config.MONGO_DB);
  checkClient = await MongoClient.connect(inject('mongoUrl'));
  await ensureIndexes(db);
  redis = createRequestPathRedis(config.REDIS_URL);
  redis.on('error', () => {});
  publisher = createEventPublisher(db, { connection: redis, prefix: config.QUEUE_PREFIX }, pino({ level: 'silent' }));
  app = await buildApp({ config, db, redis, publisher });
  await app.ready();
  workers = await startWorkers({
    config: { ...config, WORKERS: ['relay', 'automations', 'hooks', 'overdue', 'erasures'] },
    db,
    logger: pino({ level: 'silent' }),
  });
  inbox = await Receiver.start();
  tenant = await createTenant(app);
  await admin(
    app,
    'POST',
    `/companies/${tenant.companyId}/automations`,
    {
      name: 'follow up',
      trigger: 'task.created',
      actions: [{ type: 'create_task', title: 'Follow up', due_in_minutes: 60 }],
    },
    201,
  );
}, 60_000);

afterAll(async () => {
  recording = false;
  await inbox?.close();
  await workers?.close();
  await app?.close();
  await publisher?.close();
  redis?.disconnect();
  await db?.dropDatabase().catch(() => {});
  await client?.close();
  await checkClient?.close();
});

describe('sharding readiness', () => {
  it('targets every tenant query of the external API and the workers by company_id', async () => {
    recording = true;
    const hook = await ext(app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: '*' });
    expect(hook.statusCode, hook.body).toBe(201);
    await seedResources(app, tenant, inbox.url(''));
    for (const route of EXT_ROUTES) {
      const response = await ext(app, tenant.key, route.method, `${route.url(tenant)}`, route.body?.(tenant));
      expect(response.statusCode, `${route.method} ${route.url(tenant)}: ${response.body}`).toBeLessThan(500);
    }
    // An overdue task, so the scanner and the overdue event path run too.
    const overdue = await createTask(app, tenant, { due_at: new Date(Date.now() + 500).toISOString() });
    expect(
      await waitFor(
        () =>
          inbox.requests.some(
            (request) => request.body.includes('task.overdue') && request.body.includes(overdue.task_id),
          ),
        20_000,
      ),
    ).toBe(true);
    const runs = await waitFor(
      async () => (await checkClient.db(db.databaseName).collection('automation_runs').countDocuments()) > 0,
      10_000,
    );
    expect(runs).toBe(true);
    // An erasure, so the erasure job's commands are judged too.
    const erasure = (
      await admin(app, 'POST', `/companies/${tenant.companyId}/erasures`, { item_id: tenant.itemId }, 202)
    ).json<{ erasure_id: string }>();
    await waitFor(
      async () =>
        (await admin(app, 'GET', `/companies/${tenant.companyId}/erasures/${erasure.erasure_id}`)).json().status ===
        'completed',
      20_000,
    );
    recording = false;

    const byId = seen.filter((entry) => KEYED_BY_ID.has(entry.collection));
    expect(byId.filter((entry) => entry.filter._id === undefined).map((entry) => JSON.stringify(entry))).toEqual([]);
    const tenantCommands = seen.filter((entry) => TENANT_COLLECTIONS.has(entry.collection));
    expect(tenantCommands.length).toBeGreaterThan(50);
    const scattered = tenantCommands.filter(
      (entry) =>
        !hasCompanyId(entry.filter) &&
        !ALLOWED_GLOBAL.some((allowed) => allowed.matches(entry.collection, entry.filter)),
    );
    expect(scattered.map((entry) => `${entry.command} ${entry.collection} ${JSON.stringify(entry.filter)}`)).toEqual(
      [],
    );
  }, 60_000);
});
