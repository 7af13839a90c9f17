import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildEvent, type EventType } from '../../src/contracts/envelope.js';
import { HOOK_EVENTS_INDEX, HooksRepository } from '../../src/hooks/repository.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { CREATED_HOOK_KEYS, createItem, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000', HOOK_MAX_PER_COMPANY: '5' });
});
afterAll(async () => t?.close());

const target_url = 'https://hooks.example.com/receiver';

async function subscribe(tenant: Tenant, body: Record<string, unknown>) {
  const response = await ext(t.app, tenant.key, 'POST', '/hooks', body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

/** The `errors[].path` of a 400 validation_failed answer to this subscribe body. */
async function problemPaths(tenant: Tenant, body: unknown): Promise<string[]> {
  const problem = expectProblem(await ext(t.app, tenant.key, 'POST', '/hooks', body), 400, 'validation_failed');
  return problem.errors.map((error: { path: string }) => error.path);
}

describe('duplicate subscriptions (issue 16, finding 1)', () => {
  it('the same target and event answer 409 hook_exists with the hook id and never the secret', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant, { target_url, event: 'task.created' });
    expect(hook.secret).toMatch(/^whsec_/);

    const again = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url, event: 'task.created' });
    const problem = expectProblem(again, 409, 'hook_exists');
    expect(problem.hook_id).toBe(hook.hook_id);
    expect(again.body).not.toContain(hook.secret);
    expect(again.body).not.toContain('whsec_');

    // The same set of events in another order, or as `events`, is the same subscription.
    const asList = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url, events: ['task.created'] });
    expect(expectProblem(asList, 409, 'hook_exists').hook_id).toBe(hook.hook_id);
    const pair = await subscribe(tenant, { target_url, events: ['task.updated', 'item.created'] });
    const swapped = await ext(t.app, tenant.key, 'POST', '/hooks', {
      target_url,
      events: ['item.created', 'task.updated'],
    });
    expect(expectProblem(swapped, 409, 'hook_exists').hook_id).toBe(pair.hook_id);
    expect(swapped.body).not.toContain(pair.secret);

    // Secrets never show again: not in the list, not in deliveries.
    const listed = await ext(t.app, tenant.key, 'GET', '/hooks');
    expect(listed.json()).toHaveLength(2);
    expect(listed.body).not.toContain('whsec_');
    expect(listed.body).not.toContain('secret');
  });

  it('a duplicate of a disabled hook re-enables it, still without its secret', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant, { target_url, event: '*' });
    await t.db.collection('hooks').updateOne({ _id: hook.hook_id }, { $set: { disabled_at: new Date() } });
    const again = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url, event: '*' });
    expect(expectProblem(again, 409, 'hook_exists').hook_id).toBe(hook.hook_id);
    expect(again.body).not.toContain('whsec_');
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()[0].disabled_at).toBeNull();
  });
});

describe('hooks per company (issue 16, finding 4)', () => {
  it('refuses the hook over HOOK_MAX_PER_COMPANY, counting targets that differ only in the query string', async () => {
    const tenant = await createTenant(t.app);
    const other = await createTenant(t.app);
    for (let n = 0; n < 5; n++) await subscribe(tenant, { target_url: `${target_url}?n=${n}`, event: '*' });
    const over = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: `${target_url}?n=5`, event: '*' });
    expect(expectProblem(over, 400, 'hook_limit_reached').max_hooks).toBe(5);
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()).toHaveLength(5);
    // A duplicate at the cap still names the existing hook; another company has its own cap.
    expectProblem(
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: `${target_url}?n=0`, event: '*' }),
      409,
      'hook_exists',
    );
    await subscribe(other, { target_url, event: '*' });
    // Deleting one makes room again.
    const first = (await ext(t.app, tenant.key, 'GET', '/hooks')).json()[0];
    expect((await ext(t.app, tenant.key, 'DELETE', `/hooks/${first.hook_id}`)).statusCode).toBe(204);
    await subscribe(tenant, { target_url: `${target_url}?n=5`, event: '*' });
  });

  it('concurrent subscribes never leave more than the cap', async () => {
    const tenant = await createTenant(t.app);
    for (let n = 0; n < 3; n++) await subscribe(tenant, { target_url: `${target_url}?before=${n}`, event: '*' });
    const body = (n: number) => ({ target_url: `${target_url}?race=${n}`, event: '*' });
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, n) => ext(t.app, tenant.key, 'POST', '/hooks', body(n))),
    );
    for (const answer of answers) expect([201, 400]).toContain(answer.statusCode);
    // Exactly the two free places are taken; only the subscribes beyond them are refused.
    expect(answers.filter((answer) => answer.statusCode === 201)).toHaveLength(2);
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()).toHaveLength(5);
  });
});

describe('events and filter (issue 19)', () => {
  it('takes events (answering event = the first) and a filter of one of the company pipelines', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant, {
      target_url,
      events: ['task.completed', 'item.created'],
      filter: { pipeline_id: tenant.pipelineId },
    });
    expect(Object.keys(hook)).toEqual(CREATED_HOOK_KEYS);
    expect(hook).toMatchObject({
      event: 'task.completed',
      events: ['task.completed', 'item.created'],
      filter: { pipeline_id: tenant.pipelineId },
    });
    const single = await subscribe(tenant, { target_url: `${target_url}/one`, event: 'task.created' });
    expect(single).toMatchObject({ event: 'task.created', events: ['task.created'], filter: null });
    const listed = (await ext(t.app, tenant.key, 'GET', '/hooks')).json();
    const { secret: _secret, ...shown } = hook;
    expect(listed[0]).toEqual(shown);
  });

  it('refuses bad events and filters with the path of each problem', async () => {
    const tenant = await createTenant(t.app);
    const stranger = await createTenant(t.app);
    const eleven = [
      'task.created',
      'task.updated',
      'task.completed',
      'task.overdue',
      'task.deleted',
      'item.created',
      'item.updated',
      'item.deleted',
      'task.created',
      'task.updated',
      'task.completed',
    ];
    expect(await problemPaths(tenant, { target_url, events: [] })).toEqual(['events']);
    expect(new Set(await problemPaths(tenant, { target_url, events: eleven }))).toEqual(new Set(['events']));
    expect(await problemPaths(tenant, { target_url, events: ['task.created', 'task.archived'] })).toEqual(['events.1']);
    expect(await problemPaths(tenant, { target_url, events: ['*', 'task.created'] })).toEqual(['events']);
    expect(await problemPaths(tenant, { target_url, events: ['task.created', 'task.created'] })).toEqual(['events']);
    expect(new Set(await problemPaths(tenant, { target_url, events: 'task.created' }))).toEqual(new Set(['events']));
    expect(await problemPaths(tenant, { target_url, event: 'task.created', events: ['task.created'] })).toEqual([
      'events',
    ]);
    expect(await problemPaths(tenant, { target_url })).toEqual(['events']);
    expect(
      await problemPaths(tenant, { target_url, event: '*', filter: { pipeline_id: stranger.pipelineId } }),
    ).toEqual(['filter.pipeline_id']);
    expect(
      await problemPaths(tenant, { target_url, event: '*', filter: { pipeline_id: 'pip_000000000000000000000000' } }),
    ).toEqual(['filter.pipeline_id']);
    expect((await problemPaths(tenant, { target_url, event: '*', filter: { stage_id: 'x' } })).sort()).toEqual([
      'filter.pipeline_id',
      'filter.stage_id',
    ]);
    expect(await problemPaths(tenant, { target_url, event: '*', filter: { pipeline_id: '' } })).toEqual([
      'filter.pipeline_id',
    ]);
    // A schema problem and a foreign pipeline are reported together.
    expect(
      (await problemPaths(tenant, { target_url, events: [], filter: { pipeline_id: stranger.pipelineId } })).sort(),
    ).toEqual(['events', 'filter.pipeline_id']);
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()).toEqual([]);
  });

  it('an event fans out to the hooks subscribed to its type or *, whose filter it passes, in creation order', async () => {
    const tenant = await createTenant(t.app);
    const item = await createItem(t.app, tenant);
    const all = await subscribe(tenant, { target_url: `${target_url}/all`, event: '*' });
    const tasks = await subscribe(tenant, {
      target_url: `${target_url}/tasks`,
      events: ['task.created', 'task.updated'],
    });
    const filtered = await subscribe(tenant, {
      target_url: `${target_url}/filtered`,
      events: ['task.created', 'item.updated'],
      filter: { pipeline_id: tenant.pipelineId },
    });
    await subscribe(tenant, { target_url: `${target_url}/items`, event: 'item.created' });

    const matched = async (type: EventType, data: Record<string, unknown>) =>
      (await t.app.repos.hooks.enabledFor(buildEvent(type, tenant.companyId, data))).map((hook) => hook._id);
    // A task of an item in the pipeline passes the filter; a task without an item, or of another item, does not.
    expect(await matched('task.created', { task_id: 'tsk_1', item_id: item.item_id })).toEqual([
      all.hook_id,
      tasks.hook_id,
      filtered.hook_id,
    ]);
    expect(await matched('task.created', { task_id: 'tsk_1', item_id: null })).toEqual([all.hook_id, tasks.hook_id]);
    expect(await matched('task.created', { task_id: 'tsk_1', item_id: 'itm_000000000000000000000000' })).toEqual([
      all.hook_id,
      tasks.hook_id,
    ]);
    // Item events carry the item in API shape: its pipeline is `pipeline`.
    expect(await matched('item.updated', item)).toEqual([all.hook_id, filtered.hook_id]);
    expect(await matched('item.updated', { ...item, pipeline: 'pip_000000000000000000000000' })).toEqual([all.hook_id]);
    expect(await matched('task.overdue', { task_id: 'tsk_1', item_id: null })).toEqual([all.hook_id]);
  });

  it('hooks stored with the single event of section 9 keep matching and showing (migrated at start)', async () => {
    const tenant = await createTenant(t.app);
    const hooks = t.db.collection('hooks');
    await hooks.insertOne({
      _id: 'hk_6740b7a1c2d3e4f5a6b7c8d9' as never,
      company_id: tenant.companyId,
      target_url,
      event: 'task.completed',
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      created_at: new Date('2026-11-01T00:00:00Z'),
      disabled_at: null,
      failing_since: null,
    });
    // Shown with both fields even before the migration.
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()).toEqual([
      expect.objectContaining({ event: 'task.completed', events: ['task.completed'], filter: null }),
    ]);
    await HooksRepository.ensureIndexes(t.db);
    const matched = await t.app.repos.hooks.enabledFor(buildEvent('task.completed', tenant.companyId, {}));
    expect(matched.map((hook) => hook._id)).toEqual(['hk_6740b7a1c2d3e4f5a6b7c8d9']);
    // And it is one subscription with its events: subscribing the same again is a duplicate.
    const again = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url, events: ['task.completed'] });
    expect(expectProblem(again, 409, 'hook_exists').hook_id).toBe('hk_6740b7a1c2d3e4f5a6b7c8d9');
  });

  it('the fan-out lookup has its index: company, events (multikey), then creation order', async () => {
    const indexes = await t.db.collection('hooks').listIndexes().toArray();
    expect(indexes.find((index) => index.name === HOOK_EVENTS_INDEX)?.key).toEqual({
      company_id: 1,
      events: 1,
      _id: 1,
    });
    expect(indexes.map((index) => index.name)).not.toContain('company_target_event');
  });
});

/** The plan needs a query planner: a real MongoDB (MONGO_URL, or mongodb-memory-server); the stand-in has none. */
const realMongo = inject('mongoKind') !== 'standin';
describe.skipIf(!realMongo)('fan-out lookup plan on a real MongoDB', () => {
  it('reads only the matching hooks through the company_events index, no collection scan, no in-memory sort', async () => {
    const tenant = await createTenant(t.app);
    const explained = (await t.app.repos.hooks.matchingCursor(tenant.companyId, 'task.created').explain()) as {
      queryPlanner: { winningPlan: unknown };
    };
    const plan = JSON.stringify(explained.queryPlanner.winningPlan);
    expect(plan).toContain(HOOK_EVENTS_INDEX);
    expect(plan).not.toContain('COLLSCAN');
    expect(plan).not.toContain('"SORT"');
  });
});
