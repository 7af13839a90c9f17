import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

// Pipelines are cached by every web process (they shape every item request) and dropped when a
// change is announced over Redis; these tests pin down that a change is never served stale.
let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => {
  await t?.close();
});

const itemWith = (tenant: Tenant, metadata: Record<string, unknown>) => ({ name: 'Deal', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0], metadata });

async function addField(tenant: Tenant, name: string) {
  const pipeline = (await admin(t.app, 'GET', `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`, undefined, 200)).json();
  await admin(t.app, 'PATCH', `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`, { fields: [...pipeline.fields, { name, type: 'text', required: false }] }, 200);
}

describe('pipeline changes reach every web process', () => {
  it('the process that changed a pipeline uses the new blueprint on its very next request', async () => {
    const tenant = await createTenant(t.app);
    expectProblem(await ext(t.app, tenant.key, 'POST', '/items', itemWith(tenant, { territory: 'north' })), 400, 'validation_failed');
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
      await waitFor(async () => (await ext(other, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`)).statusCode === 200);
      expectProblem(await ext(other, tenant.key, 'POST', '/items', itemWith(tenant, { segment: 'smb' })), 400, 'validation_failed');
      // Proof that `other` serves from its cache: a write behind the repository's back goes unseen.
      await t.db.collection('pipelines').updateOne({ _id: tenant.pipelineId as never }, { $set: { name: 'Renamed unannounced' } });
      expect((await ext(other, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`)).json().name).toBe('Sales');
      await addField(tenant, 'segment');
      const changedAt = Date.now();
      await waitFor(async () => (await ext(other, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`)).json().fields.some((field: { name: string }) => field.name === 'segment'), 5_000, 10);
      expect(Date.now() - changedAt).toBeLessThan(1_000);
      expect((await ext(other, tenant.key, 'POST', '/items', itemWith(tenant, { segment: 'smb' }))).statusCode).toBe(201);
    } finally {
      await other.close();
    }
  });
});
