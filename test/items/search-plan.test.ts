import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CUSTOM_FIELDS_INDEX, NAME_WORDS_INDEX } from '../../src/items/repository.js';
import { itemSearch } from '../../src/items/search.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, ext, type Tenant } from '../helpers/fixtures.js';

/**
 * The plans of `q` and custom-field filters on a real MongoDB (MONGO_URL, or mongodb-memory-server):
 * an index scan of the index meant for them, never a collection scan. The stand-in has no planner.
 */
const realMongo = inject('mongoKind') !== 'standin';
const SKIP_REASON = 'skipped: needs a real MongoDB 7.0+ (set MONGO_URL); the stand-in has no query planner';

let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  if (!realMongo) return;
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await createTenant(t.app);
  // 300 items, so that a selective index plan clearly beats scanning the pipeline in created_at order.
  for (let chunk = 0; chunk < 3; chunk++) {
    const operations = Array.from({ length: 100 }, (_, index) => ({
      op: 'create',
      name: `Deal ${chunk * 100 + index} ${chunk === 0 && index === 7 ? 'Zyxel renewal' : 'standard'}`,
      pipeline_id: tenant.pipelineId,
      stage_id: tenant.stageIds[0],
      metadata: { deal_value: chunk * 100 + index, industry: index % 2 ? 'software' : 'retail' },
    }));
    const response = await ext(t.app, tenant.key, 'POST', '/items/batch', { operations });
    expect(response.statusCode, response.body).toBe(200);
  }
});
afterAll(async () => t?.close());

/** Every stage of a plan tree (classic `inputStage(s)`, and the `queryPlan` of an SBE explain). */
function stages(plan: unknown): Array<{ stage: string; indexName?: string }> {
  if (!plan || typeof plan !== 'object') return [];
  const node = plan as Record<string, unknown>;
  const own = typeof node.stage === 'string' ? [{ stage: node.stage, indexName: node.indexName as string }] : [];
  return [
    ...own,
    ...Object.values(node).flatMap((value) => (Array.isArray(value) ? value.flatMap(stages) : stages(value))),
  ];
}

async function winningStages(q: string | undefined, filters: Record<string, string>) {
  const pipeline = await t.app.repos.pipelines.findCached(tenant.companyId, tenant.pipelineId);
  const search = itemSearch(pipeline ?? undefined, q, filters);
  const explained = await t.app.repos.items
    .listCursor(
      tenant.companyId,
      { pipeline_id: tenant.pipelineId, ...search },
      { field: 'created_at', direction: 1 },
      51,
    )
    .explain('queryPlanner');
  return stages((explained as { queryPlanner: { winningPlan: unknown } }).queryPlanner.winningPlan);
}

describe.skipIf(!realMongo)(`item search plans on a real MongoDB (${realMongo ? 'running' : SKIP_REASON})`, () => {
  it('serves a custom-field range filter from the compound wildcard index', async () => {
    const plan = await winningStages(undefined, { 'metadata.deal_value[gte]': '295' });
    expect(plan.map((stage) => stage.stage)).not.toContain('COLLSCAN');
    expect(plan).toContainEqual(expect.objectContaining({ stage: 'IXSCAN', indexName: CUSTOM_FIELDS_INDEX }));
  });

  it('serves a custom-field equality filter from the compound wildcard index', async () => {
    const plan = await winningStages(undefined, { 'metadata.deal_value': '7' });
    expect(plan.map((stage) => stage.stage)).not.toContain('COLLSCAN');
    expect(plan).toContainEqual(expect.objectContaining({ stage: 'IXSCAN', indexName: CUSTOM_FIELDS_INDEX }));
  });

  it('serves q from the name_words index with anchored prefix bounds', async () => {
    const plan = await winningStages('zyx ren', {});
    expect(plan.map((stage) => stage.stage)).not.toContain('COLLSCAN');
    expect(plan).toContainEqual(expect.objectContaining({ stage: 'IXSCAN', indexName: NAME_WORDS_INDEX }));
  });
});

describe.skipIf(realMongo)('item search plans on the stand-in', () => {
  it(SKIP_REASON, () => {
    expect(inject('mongoKind')).toBe('standin');
  });
});
