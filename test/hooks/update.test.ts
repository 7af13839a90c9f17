import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent, type EventType } from '../../src/contracts/envelope.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createKey, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => t?.close());

async function subscribe(tenant: Tenant, body: Record<string, unknown> = {}) {
  const response = await ext(t.app, tenant.key, 'POST', '/hooks', {
    target_url: 'https://hooks.example.com/a',
    events: ['task.created'],
    ...body,
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

const patch = (tenant: Tenant, hookId: string, body: unknown, key = tenant.key) =>
  ext(t.app, key, 'PATCH', `/hooks/${hookId}`, body);

/** The ids of the hooks an event of this type would fan out to now. */
async function fannedOutTo(tenant: Tenant, type: EventType = 'task.created'): Promise<string[]> {
  return (await t.app.repos.hooks.enabledFor(buildEvent(type, tenant.companyId, {}))).map((hook) => hook._id);
}

describe('PATCH /v1/ext/hooks/{hook_id} (DECISIONS.md 13.2)', () => {
  it('changes target, types and filter, and keeps the secret, the creating key and the hook id', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant);
    const stored = await t.app.repos.hooks.findById(tenant.companyId, hook.hook_id);
    const changed = await patch(tenant, hook.hook_id, {
      target_url: 'https://hooks.example.com/b',
      events: ['task.completed', 'item.updated'],
      filter: { pipeline_id: tenant.pipelineId },
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toMatchObject({
      hook_id: hook.hook_id,
      target_url: 'https://hooks.example.com/b',
      event: 'task.completed',
      events: ['task.completed', 'item.updated'],
      filter: { pipeline_id: tenant.pipelineId },
      enabled: true,
      disabled_reason: null,
    });
    expect(changed.json().secret).toBeUndefined();
    const after = await t.app.repos.hooks.findById(tenant.companyId, hook.hook_id);
    expect(after?.secret).toBe(stored?.secret);
    expect(after?.created_by_key_id).toBe(tenant.keyId);
    expect(await fannedOutTo(tenant, 'task.created')).toEqual([]);
    // The filter can be removed again.
    expect((await patch(tenant, hook.hook_id, { filter: null })).json().filter).toBeNull();
  });

  it('enabled false stops the fan-out at once (manual); true re-enables it and clears the failure state', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant);
    const disabled = await patch(tenant, hook.hook_id, { enabled: false });
    expect(disabled.json()).toMatchObject({ enabled: false, disabled_reason: 'manual' });
    expect(disabled.json().disabled_at).toEqual(expect.any(String));
    expect(await fannedOutTo(tenant)).toEqual([]);

    // A hook disabled after its failures comes back with a clean record, so the 5-day rule starts again.
    const hooks = t.db.collection('hooks');
    const longAgo = new Date(Date.now() - 6 * 86_400_000);
    await hooks.updateOne(
      { _id: hook.hook_id },
      { $set: { disabled_at: new Date(), disabled_reason: 'failing', failing_since: longAgo } },
    );
    const enabled = await patch(tenant, hook.hook_id, { enabled: true });
    expect(enabled.json()).toMatchObject({ enabled: true, disabled_reason: null, disabled_at: null });
    expect((await hooks.findOne({ _id: hook.hook_id }))?.failing_since).toBeNull();
    expect(await fannedOutTo(tenant)).toEqual([hook.hook_id]);
  });

  it('answers bad input, foreign hooks, missing scopes and clashes with problem details naming the path', async () => {
    const tenant = await createTenant(t.app);
    const other = await createTenant(t.app);
    const hook = await subscribe(tenant);
    const twin = await subscribe(tenant, { target_url: 'https://hooks.example.com/twin' });

    expectProblem(await patch(other, hook.hook_id, { enabled: false }), 404, 'not_found');
    expectProblem(await patch(tenant, 'hk_000000000000000000000000', { enabled: false }), 404, 'not_found');
    const paths = async (body: unknown) =>
      expectProblem(await patch(tenant, hook.hook_id, body), 400, 'validation_failed').errors.map(
        (error: { path: string }) => error.path,
      );
    expect(await paths({})).toEqual(['target_url']);
    expect(await paths({ colour: 'red' })).toContain('colour');
    expect(await paths({ target_url: 'ftp://hooks.example.com' })).toEqual(['target_url']);
    expect(await paths({ events: [] })).toEqual(['events']);
    expect(await paths({ events: ['task.exploded'] })).toEqual(['events.0']);
    expect(await paths({ filter: { pipeline_id: other.pipelineId } })).toEqual(['filter.pipeline_id']);
    expect(await paths({ filter: { exclude_actors: [other.keyId] } })).toEqual(['filter.exclude_actors.0']);
    expect(await paths({ enabled: 'yes' })).toEqual(['enabled']);

    const manageOnly = (await createKey(t.app, tenant.companyId, tenant.userId, ['hooks:manage', 'tasks:read'])).key;
    const refused = expectProblem(
      await patch(tenant, hook.hook_id, { events: ['item.created'] }, manageOnly),
      403,
      'insufficient_scope',
    );
    expect(refused.required_scope).toBe('items:read');

    const clash = expectProblem(
      await patch(tenant, twin.hook_id, { target_url: 'https://hooks.example.com/a' }),
      409,
      'hook_exists',
    );
    expect(clash.hook_id).toBe(hook.hook_id);
    expect((await t.app.repos.hooks.findById(tenant.companyId, twin.hook_id))?.target_url).toBe(
      'https://hooks.example.com/twin',
    );
  });

  it('a hook disabled because its key was revoked stays disabled', async () => {
    const tenant = await createTenant(t.app);
    const key = await createKey(t.app, tenant.companyId, tenant.userId, ['hooks:manage', 'tasks:read']);
    const hook = (
      await ext(t.app, key.key, 'POST', '/hooks', {
        target_url: 'https://hooks.example.com/k',
        events: ['task.created'],
      })
    ).json();
    await t.app.inject({
      method: 'DELETE',
      url: `/v1/admin/companies/${tenant.companyId}/api-keys/${key.key_id}`,
      headers: { authorization: `Bearer ${t.config.ADMIN_TOKEN}` },
    });
    const refused = expectProblem(await patch(tenant, hook.hook_id, { enabled: true }), 400, 'validation_failed');
    expect(refused.errors[0].path).toBe('enabled');
    expect((await t.app.repos.hooks.findById(tenant.companyId, hook.hook_id))?.disabled_reason).toBe('key_revoked');
  });
});
