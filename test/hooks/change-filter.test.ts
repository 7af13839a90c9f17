import { describe, expect, inject, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import { HOOK_EVENTS_INDEX, HooksRepository } from '../../src/hooks/repository.js';
import { onMongoCommand } from '../../src/shared/mongo-commands.js';
import { connectMongo } from '../../src/shared/mongo.js';
import { createItem, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { hooksTestEnv } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';

const env = hooksTestEnv({});

const paths = (body: { errors: Array<{ path: string }> }) => body.errors.map((error) => error.path);

const patchItem = async (tenant: Tenant, itemId: string, body: Record<string, unknown>) => {
  const response = await ext(env.t.app, tenant.key, 'PATCH', `/items/${itemId}`, body);
  expect(response.statusCode, response.body).toBe(200);
  return response.json();
};

describe('filter.changes (DECISIONS.md 13.2)', () => {
  it('a hook filtered on a stage move into Won gets the move, not a rename nor a move elsewhere', async () => {
    const tenant = await createTenant(env.t.app);
    const won = tenant.stageIds[2]!;
    const filtered = await env.receiver();
    const everything = await env.receiver();
    const hook = await env.subscribe(tenant, {
      target_url: filtered.url(),
      events: ['item.updated', 'item.created'],
      filter: { changes: { stage: { to: won } } },
    });
    expect(hook.filter).toEqual({ changes: { stage: { to: won } } });
    await env.subscribe(tenant, { target_url: everything.url(), events: ['item.updated'] });

    const item = await createItem(env.t.app, tenant);
    await patchItem(tenant, item.item_id, { name: 'Renamed deal' });
    await patchItem(tenant, item.item_id, { stage_id: tenant.stageIds[1] });
    await patchItem(tenant, item.item_id, { stage_id: won });
    await patchItem(tenant, item.item_id, { name: 'Renamed again' });
    // The unfiltered hook got all four updates: the fan-out has judged every one of them.
    await waitFor(() => everything.requests.length >= 4);
    await waitFor(() => filtered.requests.length >= 2);
    const got = filtered.requests.map((request) => JSON.parse(request.body));
    // item.created is not judged by `changes`; of the updates only the move into Won.
    expect(got.map((event) => event.type).sort()).toEqual(['item.created', 'item.updated']);
    const update = got.find((event) => event.type === 'item.updated');
    expect(update.changes.stage).toEqual({ from: tenant.stageIds[1], to: won });
    expect(filtered.requests).toHaveLength(2);
  });

  it('matches custom fields by name and values by their normal form; PATCH changes the filter', async () => {
    const tenant = await createTenant(env.t.app);
    const receiver = await env.receiver();
    const everything = await env.receiver();
    const hook = await env.subscribe(tenant, {
      target_url: receiver.url(),
      events: ['item.updated'],
      filter: { pipeline_id: tenant.pipelineId, changes: { deal_value: {} } },
    });
    await env.subscribe(tenant, { target_url: everything.url(), events: ['item.updated'] });
    const item = await createItem(env.t.app, tenant);
    await patchItem(tenant, item.item_id, { metadata: { deal_value: 500 } });
    await patchItem(tenant, item.item_id, { metadata: { industry: 'retail' } });
    await waitFor(() => everything.requests.length >= 2);
    await waitFor(() => receiver.requests.length >= 1);
    expect(receiver.requests.map((request) => JSON.parse(request.body).changes)).toEqual([
      { deal_value: { from: null, to: 500 } },
    ]);

    const patched = await ext(env.t.app, tenant.key, 'PATCH', `/hooks/${hook.hook_id}`, {
      filter: { changes: { industry: { from: 'retail', to: 'software' } } },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().filter).toEqual({ changes: { industry: { from: 'retail', to: 'software' } } });
    await patchItem(tenant, item.item_id, { metadata: { deal_value: 900 } });
    await patchItem(tenant, item.item_id, { metadata: { industry: 'software' } });
    await waitFor(() => everything.requests.length >= 4);
    await waitFor(() => receiver.requests.length >= 2);
    expect(JSON.parse(receiver.requests[1]!.body).changes).toEqual({ industry: { from: 'retail', to: 'software' } });
    expect(receiver.requests).toHaveLength(2);
  });

  it('refuses unknown fields and values of the wrong type with their paths, at subscribe and at PATCH', async () => {
    const tenant = await createTenant(env.t.app);
    const subscribe = (filter: unknown, events: string[] = ['*']) =>
      ext(env.t.app, tenant.key, 'POST', '/hooks', { target_url: 'https://hooks.example.com/x', events, filter });
    const refused = async (response: Awaited<ReturnType<typeof subscribe>>) =>
      paths(expectProblem(response, 400, 'validation_failed'));
    expect(await refused(await subscribe({ changes: { colour: {} } }))).toEqual(['filter.changes.colour']);
    expect(await refused(await subscribe({ changes: { deal_value: { to: 'a lot' } } }))).toEqual([
      'filter.changes.deal_value.to',
    ]);
    expect(await refused(await subscribe({ changes: { is_completed: { to: 'yes' }, stage: { from: 7 } } }))).toEqual([
      'filter.changes.is_completed.to',
      'filter.changes.stage.from',
    ]);
    // Item fields are not task.updated's; a hook without an *.updated type has nothing to judge.
    expect(await refused(await subscribe({ changes: { stage: {} } }, ['task.updated']))).toEqual([
      'filter.changes.stage',
    ]);
    expect(await refused(await subscribe({ changes: { stage: {} } }, ['item.created']))).toEqual(['filter.changes']);
    expect(await refused(await subscribe({ changes: {} }))).toEqual(['filter.changes']);
    expect(await refused(await subscribe({ changes: { stage: { to: 'x', by: 'me' } } }))).toEqual([
      'filter.changes.stage.by',
    ]);

    const hook = await env.subscribe(tenant, {
      target_url: 'https://hooks.example.com/y',
      events: ['item.updated'],
      filter: { changes: { stage: {} } },
    });
    const patch = (body: unknown) => ext(env.t.app, tenant.key, 'PATCH', `/hooks/${hook.hook_id}`, body);
    expect(await refused(await patch({ filter: { changes: { deal_value: { to: true } } } }))).toEqual([
      'filter.changes.deal_value.to',
    ]);
    // Changing only the types re-judges the filter kept: stage is no task.updated field.
    expect(await refused(await patch({ events: ['task.updated'] }))).toEqual(['filter.changes.stage']);
    expect((await ext(env.t.app, tenant.key, 'GET', '/hooks')).json()[0].filter).toEqual({ changes: { stage: {} } });
  });

  it('the fan-out judges the filter without reading MongoDB per event', async () => {
    const tenant = await createTenant(env.t.app);
    await env.subscribe(tenant, {
      target_url: 'https://hooks.example.com/z',
      events: ['item.updated'],
      filter: { pipeline_id: tenant.pipelineId, changes: { stage: { to: tenant.stageIds[2] } } },
    });
    const mongo = await connectMongo(env.t.config.MONGO_URL!, env.t.config.MONGO_DB, 5_000, { monitorCommands: true });
    try {
      const changes = env.t.app.services.changes.hooks;
      await waitFor(() => changes.live);
      const hooks = new HooksRepository(mongo.db, changes);
      const event = (to: string) =>
        buildEvent(
          'item.updated',
          tenant.companyId,
          { pipeline: tenant.pipelineId },
          {
            changes: { stage: { from: tenant.stageIds[0], to } },
          },
        );
      expect(await hooks.enabledFor(event(tenant.stageIds[2]!))).toHaveLength(1); // loads the company's hooks once
      let commands = 0;
      const stop = onMongoCommand(mongo.client, () => commands++);
      const matched = [];
      for (let i = 0; i < 50; i++) matched.push((await hooks.enabledFor(event(tenant.stageIds[i % 3]!))).length);
      stop();
      expect(commands).toBe(0);
      expect(matched.filter((count) => count === 1)).toHaveLength(16);
    } finally {
      await mongo.client.close();
    }
  });
});

const realMongo = inject('mongoKind') !== 'standin';
describe.skipIf(!realMongo)('fan-out lookup plan with filter.changes on a real MongoDB', () => {
  it('still reads only the matching hooks through the company_events index, no scan, no in-memory sort', async () => {
    const tenant = await createTenant(env.t.app);
    for (const stage of tenant.stageIds)
      await env.subscribe(tenant, {
        target_url: `https://hooks.example.com/${stage}`,
        events: ['item.updated'],
        filter: { changes: { stage: { to: stage } } },
      });
    const explained = (await env.t.app.repos.hooks.matchingCursor(tenant.companyId, 'item.updated').explain()) as {
      queryPlanner: { winningPlan: unknown };
    };
    const plan = JSON.stringify(explained.queryPlanner.winningPlan);
    expect(plan).toContain(HOOK_EVENTS_INDEX);
    expect(plan).not.toContain('COLLSCAN');
    expect(plan).not.toContain('"SORT"');
  });
});
