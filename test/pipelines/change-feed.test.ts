import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { PrivateRedisServer } from '../../src/dev/redis-server.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { buildTestApp, testConfig, type TestApp } from '../helpers/app.js';
import { admin, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { sleep, waitFor } from '../helpers/wait.js';

// Pipelines are cached by every web process (they shape every item request) and dropped when a
// change is announced over Redis; these tests pin down that a change is never served stale.
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => {
  await t?.close();
});

const itemWith = (tenant: Tenant, metadata: Record<string, unknown>) => ({
  name: 'Deal',
  pipeline_id: tenant.pipelineId,
  stage_id: tenant.stageIds[0],
  metadata,
});

async function addField(tenant: Tenant, name: string) {
  const pipeline = (
    await admin(t.app, 'GET', `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`, undefined, 200)
  ).json();
  await admin(
    t.app,
    'PATCH',
    `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`,
    { fields: [...pipeline.fields, { name, type: 'text', required: false }] },
    200,
  );
}

describe('pipeline changes reach every web process', () => {
  it('the process that changed a pipeline uses the new blueprint on its very next request', async () => {
    const tenant = await createTenant(t.app);
    expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', itemWith(tenant, { territory: 'north' })),
      400,
      'validation_failed',
    );
    await addField(tenant, 'territory');
    const created = await ext(t.app, tenant.key, 'POST', '/items', itemWith(tenant, { territory: 'north' }));
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().territory).toBe('north');
  });

  it('another process that has the pipeline cached sees the change within a second, not after its 5 s expiry', async () => {
    const other = await buildApp({ config: t.config, db: t.db, redis: t.redis });
    try {
      await other.ready();
      const tenant = await createTenant(t.app);
      // Wait until `other` listens for changes, then make it cache the pipeline (an unknown field is refused).
      await waitFor(() => other.services.changes.pipelines.live);
      expect((await ext(other, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`)).statusCode).toBe(200);
      expectProblem(
        await ext(other, tenant.key, 'POST', '/items', itemWith(tenant, { segment: 'smb' })),
        400,
        'validation_failed',
      );
      // Proof that `other` serves from its cache: a write behind the repository's back goes unseen.
      await t.db
        .collection('pipelines')
        .updateOne({ _id: tenant.pipelineId as never }, { $set: { name: 'Renamed unannounced' } });
      expect((await ext(other, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`)).json().name).toBe('Sales');
      await addField(tenant, 'segment');
      const changedAt = Date.now();
      await waitFor(
        async () =>
          (await ext(other, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`))
            .json()
            .fields.some((field: { name: string }) => field.name === 'segment'),
        5_000,
        10,
      );
      expect(Date.now() - changedAt).toBeLessThan(1_000);
      expect((await ext(other, tenant.key, 'POST', '/items', itemWith(tenant, { segment: 'smb' }))).statusCode).toBe(
        201,
      );
    } finally {
      await other.close();
    }
  });

  it('while Redis is away nothing is served from the cache, and once it is back changes reach every process again', async () => {
    const redisServer = await PrivateRedisServer.start();
    const config = testConfig({ REDIS_URL: redisServer.url, RATE_LIMIT_MAX: '100000' });
    const connections = [createRequestPathRedis(redisServer.url), createRequestPathRedis(redisServer.url)] as const;
    connections.forEach((redis) => redis.on('error', () => {}));
    const [writer, reader] = await Promise.all([
      buildApp({ config, db: t.db, redis: connections[0] }),
      buildApp({ config, db: t.db, redis: connections[1] }),
    ]);
    const nameSeenBy = async (app: typeof reader, tenant: Tenant) =>
      (await ext(app, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`)).json().name;
    const rename = (tenant: Tenant, name: string) =>
      admin(writer, 'PATCH', `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`, { name }, 200);
    try {
      const tenant = await createTenant(writer);
      await waitFor(async () => (await nameSeenBy(reader, tenant)) === 'Sales'); // cached by `reader` once it listens

      await redisServer.stop();
      await sleep(100);
      await rename(tenant, 'Renamed during the outage'); // its announcement cannot be sent
      expect(await nameSeenBy(reader, tenant)).toBe('Renamed during the outage');

      await redisServer.start();
      await waitFor(() => connections.every((redis) => redis.status === 'ready'), 10_000);
      // The reader caches again once its subscriber is back: a write behind the repository's back goes unseen.
      let probe = 0;
      await waitFor(async () => {
        const before = await nameSeenBy(reader, tenant);
        await t.db
          .collection('pipelines')
          .updateOne({ _id: tenant.pipelineId as never }, { $set: { name: `Unannounced ${++probe}` } });
        return (await nameSeenBy(reader, tenant)) === before;
      }, 10_000);
      await rename(tenant, 'Renamed after the outage');
      const renamedAt = Date.now();
      await waitFor(async () => (await nameSeenBy(reader, tenant)) === 'Renamed after the outage', 5_000, 10);
      expect(Date.now() - renamedAt).toBeLessThan(1_000);
    } finally {
      await Promise.all([writer.close(), reader.close()]);
      connections.forEach((redis) => redis.disconnect());
      await redisServer.stop();
    }
  });
});
