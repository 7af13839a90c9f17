import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { CREATED_HOOK_KEYS, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => t?.close());

const target_url = 'https://hooks.example.com/receiver';

async function subscribe(tenant: Tenant, body: Record<string, unknown> = { target_url, event: 'task.created' }) {
  const response = await ext(t.app, tenant.key, 'POST', '/hooks', body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

describe('hook subscriptions', () => {
  it('create returns the secret once; the list never shows it', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant);
    expect(Object.keys(hook)).toEqual(CREATED_HOOK_KEYS);
    expect(hook).toMatchObject({
      target_url,
      event: 'task.created',
      events: ['task.created'],
      filter: null,
      disabled_at: null,
      created_at: expect.stringMatching(/\.\d{3}Z$/),
    });
    const listed = await ext(t.app, tenant.key, 'GET', '/hooks');
    expect(listed.statusCode).toBe(200);
    const { secret, ...shown } = hook;
    expect(listed.json()).toEqual([shown]);
    expect(listed.body).not.toContain(secret);
  });

  it('validates the body: event type, URL scheme, credentials, unknown fields', async () => {
    const tenant = await createTenant(t.app);
    const paths = async (body: unknown) =>
      expectProblem(await ext(t.app, tenant.key, 'POST', '/hooks', body), 400, 'validation_failed').errors.map(
        (e: { path: string }) => e.path,
      );
    expect(await paths({ target_url, event: 'task.archived' })).toEqual(['event']);
    expect(await paths({ target_url: 'ftp://hooks.example.com/x', event: '*' })).toEqual(['target_url']);
    expect(await paths({ target_url: 'not a url', event: '*' })).toEqual(['target_url']);
    expect(await paths({ target_url: 'https://user:pw@hooks.example.com/x', event: '*' })).toEqual(['target_url']);
    expect(await paths({ target_url, event: '*', secret: 'mine' })).toEqual(['secret']);
    expect(await paths({ event: '*' })).toEqual(['target_url']);
  });

  it('the list pages with limit and cursor like every list', async () => {
    const tenant = await createTenant(t.app);
    const first = await subscribe(tenant, { target_url, event: 'task.created' });
    const second = await subscribe(tenant, { target_url, event: 'task.updated' });
    expectProblem(await ext(t.app, tenant.key, 'GET', '/hooks?limit=0'), 400, 'validation_failed');
    const page = await ext(t.app, tenant.key, 'GET', '/hooks?limit=1');
    expect(page.json().map((hook: { hook_id: string }) => hook.hook_id)).toEqual([first.hook_id]);
    const next = page.headers['x-next-cursor'] as string;
    expect(page.headers.link).toContain('rel="next"');
    const rest = await ext(t.app, tenant.key, 'GET', `/hooks?limit=1&cursor=${next}`);
    expect(rest.json().map((hook: { hook_id: string }) => hook.hook_id)).toEqual([second.hook_id]);
    expect(rest.headers['x-next-cursor']).toBeUndefined();
  });

  it('unsubscribe answers 204, then 404', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant);
    const deleted = await ext(t.app, tenant.key, 'DELETE', `/hooks/${hook.hook_id}`);
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expectProblem(await ext(t.app, tenant.key, 'DELETE', `/hooks/${hook.hook_id}`), 404, 'not_found');
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()).toEqual([]);
  });

  it('deliveries of a hook without any are an empty list', async () => {
    const tenant = await createTenant(t.app);
    const hook = await subscribe(tenant);
    const response = await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual([]);
  });
});

describe('tenant isolation', () => {
  it("another company's hook id, an unknown id and a malformed id are 404 on every hook route", async () => {
    const owner = await createTenant(t.app);
    const stranger = await createTenant(t.app);
    const hook = await subscribe(owner);
    const event = buildEvent('task.created', owner.companyId, {});
    await t.app.repos.deliveries.recordAttempt({
      key: `${hook.hook_id}:${event.event_id}`,
      target: { hook_id: hook.hook_id, automation_id: null },
      event,
      attempt: {
        attempt: 1,
        status_code: 500,
        error: null,
        duration_ms: 5,
        succeeded: false,
        next_retry_at: null,
        attempted_at: new Date(),
      },
      job: { id: `${hook.hook_id}:${event.event_id}:event`, target: { kind: 'hook', hook_id: hook.hook_id } },
    });
    const routes = (id: string) =>
      [
        ['GET', `/hooks/${id}/deliveries`],
        ['POST', `/hooks/${id}/deliveries/${event.event_id}/redeliver`],
        ['DELETE', `/hooks/${id}`],
      ] as const;
    for (const id of [hook.hook_id, 'hk_000000000000000000000000', 'not-an-id', '%24where']) {
      for (const [method, url] of routes(id))
        expectProblem(await ext(t.app, stranger.key, method, url), 404, 'not_found');
    }
    expect((await ext(t.app, stranger.key, 'GET', '/hooks')).json()).toEqual([]);
    // The owner still sees everything, untouched.
    expect((await ext(t.app, owner.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json()).toHaveLength(1);
    expect((await ext(t.app, owner.key, 'GET', '/hooks')).json()).toHaveLength(1);
  });
});
