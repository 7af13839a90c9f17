import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { admin, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => t?.close());

const target_url = 'https://hooks.example.com/receiver';
const ADMIN_HOOK_KEYS = [
  'hook_id',
  'target_url',
  'event',
  'events',
  'filter',
  'created_at',
  'enabled',
  'disabled_reason',
  'disabled_at',
  'created_by_key_id',
];

async function subscribe(tenant: Tenant, body: Record<string, unknown>) {
  const response = await ext(t.app, tenant.key, 'POST', '/hooks', body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

describe("the admin API's view of a company's hooks (DECISIONS.md 13.4)", () => {
  it('lists them without secrets, with the key that created each, and reads one', async () => {
    const tenant = await createTenant(t.app);
    const first = await subscribe(tenant, { target_url, events: ['task.created', 'item.created'] });
    const second = await subscribe(tenant, { target_url, event: '*', filter: { pipeline_id: tenant.pipelineId } });
    const listed = await admin(t.app, 'GET', `/companies/${tenant.companyId}/hooks`, undefined, 200);
    const hooks = listed.json();
    expect(hooks.map((hook: { hook_id: string }) => hook.hook_id)).toEqual([first.hook_id, second.hook_id]);
    for (const hook of hooks) expect(Object.keys(hook)).toEqual(ADMIN_HOOK_KEYS);
    expect(listed.body).not.toContain(first.secret);
    expect(listed.body).not.toContain('whsec_');
    const { secret: _secret, ...shown } = first;
    expect(hooks[0]).toEqual({ ...shown, created_by_key_id: tenant.keyId });

    const one = await admin(t.app, 'GET', `/companies/${tenant.companyId}/hooks/${second.hook_id}`, undefined, 200);
    expect(one.json()).toEqual(hooks[1]);
    expect(one.body).not.toContain('whsec_');
  });

  it('shows a hook whose key was revoked as disabled with key_revoked', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant, { target_url, event: 'task.created' });
    await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/api-keys/${tenant.keyId}`, undefined, 204);
    const shown = (
      await admin(t.app, 'GET', `/companies/${tenant.companyId}/hooks/${hook.hook_id}`, undefined, 200)
    ).json();
    expect(shown).toMatchObject({
      enabled: false,
      disabled_reason: 'key_revoked',
      disabled_at: expect.stringMatching(/Z$/),
      created_by_key_id: tenant.keyId,
    });
  });

  it('deletes one (204, then 404), with its delivery records; nothing else of the company goes', async () => {
    const tenant = await createTenant(t.app);
    const doomed = await subscribe(tenant, { target_url, event: 'task.created' });
    const kept = await subscribe(tenant, { target_url, event: 'task.updated' });
    await t.db.collection('deliveries').insertOne({
      _id: `${doomed.hook_id}:evt_1`,
      company_id: tenant.companyId,
      hook_id: doomed.hook_id,
    } as never);
    await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/hooks/${doomed.hook_id}`, undefined, 204);
    expect(await t.db.collection('deliveries').countDocuments({ hook_id: doomed.hook_id })).toBe(0);
    expectProblem(
      await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/hooks/${doomed.hook_id}`),
      404,
      'not_found',
    );
    expectProblem(
      await admin(t.app, 'GET', `/companies/${tenant.companyId}/hooks/${doomed.hook_id}`),
      404,
      'not_found',
    );
    const remaining = (await ext(t.app, tenant.key, 'GET', '/hooks')).json();
    expect(remaining.map((hook: { hook_id: string }) => hook.hook_id)).toEqual([kept.hook_id]);
    // Nothing is sent to it any more.
    const fanOut = await t.app.repos.hooks.enabledFor({
      company_id: tenant.companyId,
      type: 'task.created',
      data: {},
      actor: { type: 'system' },
    });
    expect(fanOut).toEqual([]);
  });

  it("answers 404 for another company's hook, an unknown hook and an unknown company; 401 without the token", async () => {
    const owner = await createTenant(t.app);
    const other = await createTenant(t.app);
    const hook = await subscribe(owner, { target_url, event: 'task.created' });
    for (const method of ['GET', 'DELETE'] as const) {
      expectProblem(
        await admin(t.app, method, `/companies/${other.companyId}/hooks/${hook.hook_id}`),
        404,
        'not_found',
      );
      expectProblem(await admin(t.app, method, `/companies/${owner.companyId}/hooks/hk_unknown`), 404, 'not_found');
      expectProblem(
        await admin(t.app, method, `/companies/cmp_000000000000000000000000/hooks/${hook.hook_id}`),
        404,
        'not_found',
      );
    }
    expectProblem(await admin(t.app, 'GET', '/companies/cmp_000000000000000000000000/hooks'), 404, 'not_found');
    expect((await admin(t.app, 'GET', `/companies/${other.companyId}/hooks`, undefined, 200)).json()).toEqual([]);
    // The owner's hook is still there.
    expect((await admin(t.app, 'GET', `/companies/${owner.companyId}/hooks`, undefined, 200)).json()).toHaveLength(1);
    const anonymous = await t.app.inject({ method: 'GET', url: `/v1/admin/companies/${owner.companyId}/hooks` });
    expectProblem(anonymous, 401, 'unauthorized');
    const wrong = await t.app.inject({
      method: 'DELETE',
      url: `/v1/admin/companies/${owner.companyId}/hooks/${hook.hook_id}`,
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}x` },
    });
    expectProblem(wrong, 401, 'unauthorized');
  });

  it('is in the admin OpenAPI document, with the AdminHook schema and no secret', async () => {
    const document = (await t.app.inject({ method: 'GET', url: '/v1/admin/openapi.json' })).json();
    const list = document.paths['/v1/admin/companies/{company_id}/hooks'];
    const one = document.paths['/v1/admin/companies/{company_id}/hooks/{hook_id}'];
    expect(list.get.operationId).toBe('listCompanyHooks');
    expect(one.get.operationId).toBe('getCompanyHook');
    expect(one.delete.operationId).toBe('deleteCompanyHook');
    expect(one.delete.responses['204']).toBeDefined();
    expect(one.get.responses['404']).toBeDefined();
    const schema = document.components.schemas.AdminHook;
    expect(Object.keys(schema.properties)).toEqual(ADMIN_HOOK_KEYS);
    expect(JSON.stringify(schema.properties.disabled_reason)).toMatch(/"failing","key_revoked"/);
    expect(schema.properties).not.toHaveProperty('secret');
  });
});
