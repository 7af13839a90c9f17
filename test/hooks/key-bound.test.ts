import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent, type EventType } from '../../src/contracts/envelope.js';
import { retryPolicyFrom } from '../../src/hooks/delivery-policy.js';
import { deliverWebhook, type DeliveryDeps } from '../../src/hooks/delivery.js';
import { HooksRepository } from '../../src/hooks/repository.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createKey, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import type { WebhookRequest } from '../../src/hooks/sender.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => t?.close());

const target_url = 'https://hooks.example.com/receiver';

/** Another key of the tenant's company, with these scopes (and any other fields of the create body). */
async function keyOf(tenant: Tenant, scopes: string[], extra: Record<string, unknown> = {}) {
  return createKey(t.app, tenant.companyId, tenant.userId, scopes, extra);
}

async function subscribe(key: string, body: Record<string, unknown>) {
  const response = await ext(t.app, key, 'POST', '/hooks', body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

/** The ids of the hooks an event of this type would fan out to now. */
async function fannedOutTo(tenant: Tenant, type: EventType = 'task.created'): Promise<string[]> {
  return (await t.app.repos.hooks.enabledFor(buildEvent(type, tenant.companyId, {}))).map((hook) => hook._id);
}

describe('a hook needs the read scope of its events (DECISIONS.md 13.4)', () => {
  it('refuses task.*, item.* and * to a key without tasks:read / items:read, naming the missing scope', async () => {
    const tenant = await createTenant(t.app);
    const manageOnly = (await keyOf(tenant, ['hooks:manage'])).key;
    const refused = async (key: string, body: Record<string, unknown>) =>
      expectProblem(await ext(t.app, key, 'POST', '/hooks', { target_url, ...body }), 403, 'insufficient_scope')
        .required_scope;
    expect(await refused(manageOnly, { events: ['*'] })).toBe('tasks:read');
    expect(await refused(manageOnly, { event: 'task.created' })).toBe('tasks:read');
    expect(await refused(manageOnly, { events: ['item.updated'] })).toBe('items:read');
    expect(await refused(manageOnly, { events: ['item.created', 'task.created'] })).toBe('items:read');

    const tasksOnly = (await keyOf(tenant, ['hooks:manage', 'tasks:read'])).key;
    expect(await refused(tasksOnly, { events: ['*'] })).toBe('items:read');
    expect(await refused(tasksOnly, { events: ['task.created', 'item.deleted'] })).toBe('items:read');
    await subscribe(tasksOnly, { target_url, events: ['task.created', 'task.overdue'] });

    const itemsOnly = (await keyOf(tenant, ['hooks:manage', 'items:read'])).key;
    expect(await refused(itemsOnly, { event: '*' })).toBe('tasks:read');
    await subscribe(itemsOnly, { target_url, events: ['item.created'] });

    const both = (await keyOf(tenant, ['hooks:manage', 'tasks:read', 'items:read'])).key;
    await subscribe(both, { target_url, events: ['*'] });
    // Nothing was stored for the refused subscriptions.
    expect(await t.db.collection('hooks').countDocuments({ company_id: tenant.companyId })).toBe(3);
    // hooks:manage itself is still needed first.
    expect(
      expectProblem(
        await ext(t.app, (await keyOf(tenant, ['tasks:read', 'items:read'])).key, 'POST', '/hooks', {
          target_url,
          event: '*',
        }),
        403,
        'insufficient_scope',
      ).required_scope,
    ).toBe('hooks:manage');
  });
});

describe('a hook lives no longer than the key that created it', () => {
  it('revoking the key disables its hooks at once (key_revoked), and nothing re-enables them', async () => {
    const tenant = await createTenant(t.app);
    const doomed = await keyOf(tenant, ['hooks:manage', 'tasks:read', 'items:read']);
    const revokedHook = await subscribe(doomed.key, { target_url, events: ['*'] });
    const keptHook = await subscribe(tenant.key, { target_url: `${target_url}/kept`, events: ['*'] });
    expect(revokedHook).toMatchObject({ enabled: true, disabled_reason: null, disabled_at: null });
    expect(await fannedOutTo(tenant)).toEqual([revokedHook.hook_id, keptHook.hook_id]);
    expect((await t.db.collection('hooks').findOne({ _id: revokedHook.hook_id }))!.created_by_key_id).toBe(
      doomed.key_id,
    );

    const before = Date.now();
    await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/api-keys/${doomed.key_id}`, undefined, 204);
    // At once: the answer to the revocation is enough, no wait.
    expect(await fannedOutTo(tenant)).toEqual([keptHook.hook_id]);
    const listed = (await ext(t.app, tenant.key, 'GET', '/hooks')).json();
    const shown = listed.find((hook: { hook_id: string }) => hook.hook_id === revokedHook.hook_id);
    expect(shown).toMatchObject({ enabled: false, disabled_reason: 'key_revoked' });
    expect(Date.parse(shown.disabled_at)).toBeGreaterThanOrEqual(before - 5);
    expect(listed.find((hook: { hook_id: string }) => hook.hook_id === keptHook.hook_id)).toMatchObject({
      enabled: true,
      disabled_reason: null,
      disabled_at: null,
    });

    // Subscribing again with another key answers 409 hook_exists but does not re-enable it; nor does a test.
    const again = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url, events: ['*'] });
    expect(expectProblem(again, 409, 'hook_exists').hook_id).toBe(revokedHook.hook_id);
    expect((await ext(t.app, tenant.key, 'POST', `/hooks/${revokedHook.hook_id}/test`)).statusCode).toBe(202);
    expect(await fannedOutTo(tenant)).toEqual([keptHook.hook_id]);
    const stored = await t.db.collection('hooks').findOne({ _id: revokedHook.hook_id });
    expect(stored).toMatchObject({ disabled_reason: 'key_revoked', disabled_at: expect.any(Date) });

    // A retry or redelivery already queued for it is skipped too.
    const sent: WebhookRequest[] = [];
    const deps: DeliveryDeps = {
      hooks: t.app.repos.hooks,
      deliveries: t.app.repos.deliveries,
      secrets: t.app.repos.webhookSecrets,
      retry: retryPolicyFrom({ HOOK_MAX_ATTEMPTS: 8 }),
      logger: pino({ level: 'silent' }),
      send: async (webhook) => {
        sent.push(webhook);
        return { kind: 'response', statusCode: 200, durationMs: 1 };
      },
    };
    const job = {
      event: buildEvent('task.created', tenant.companyId, {}),
      target: { kind: 'hook' as const, hook_id: revokedHook.hook_id },
    };
    const outcome = await deliverWebhook(job, { jobId: 'j', attempt: 2 }, deps);
    expect(outcome).toEqual({ outcome: 'skipped', reason: 'hook disabled' });
    expect(sent).toHaveLength(0);
  });

  it('a hook disabled for failing whose key is then revoked becomes key_revoked, and a redelivery leaves it so', async () => {
    const tenant = await createTenant(t.app);
    const doomed = await keyOf(tenant, ['hooks:manage', 'tasks:read']);
    const hook = await subscribe(doomed.key, { target_url, event: 'task.created' });
    await t.db
      .collection('hooks')
      .updateOne({ _id: hook.hook_id }, { $set: { disabled_at: new Date(), disabled_reason: 'failing' } });
    await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/api-keys/${doomed.key_id}`, undefined, 204);
    expect((await t.db.collection('hooks').findOne({ _id: hook.hook_id }))!.disabled_reason).toBe('key_revoked');
    expect(await t.app.repos.hooks.reenable(tenant.companyId, hook.hook_id)).toBeNull();
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()[0]).toMatchObject({
      enabled: false,
      disabled_reason: 'key_revoked',
    });
  });

  it("a key's expiry disables its hooks from that moment: not fanned out to, shown as key_revoked", async () => {
    const tenant = await createTenant(t.app);
    const expiresAt = new Date(Date.now() + 1_500);
    const shortLived = await keyOf(tenant, ['hooks:manage', 'tasks:read'], { expires_at: expiresAt.toISOString() });
    const hook = await subscribe(shortLived.key, { target_url, event: 'task.created' });
    expect(await fannedOutTo(tenant)).toEqual([hook.hook_id]);
    await waitFor(() => Date.now() > expiresAt.getTime() + 10, 5_000, 50);
    expect(await fannedOutTo(tenant)).toEqual([]);
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()[0]).toMatchObject({
      hook_id: hook.hook_id,
      enabled: false,
      disabled_reason: 'key_revoked',
      disabled_at: expiresAt.toISOString(),
    });
  });

  it('a subscribe whose key is revoked while it runs keeps no hook (401)', async () => {
    const tenant = await createTenant(t.app);
    const doomed = await keyOf(tenant, ['hooks:manage', 'tasks:read']);
    // Authenticated once (and cached), then revoked in the database behind the cache's back.
    await subscribe(doomed.key, { target_url, event: 'task.created' });
    await t.db.collection('api_keys').updateOne({ _id: doomed.key_id as never }, { $set: { revoked_at: new Date() } });
    const late = await ext(t.app, doomed.key, 'POST', '/hooks', { target_url, event: 'task.updated' });
    expectProblem(late, 401, 'unauthorized');
    expect(await t.db.collection('hooks').countDocuments({ company_id: tenant.companyId })).toBe(1);
  });
});

describe('hooks stored before keys were recorded (start-up migration)', () => {
  it('are kept and listed with no creating key, never disabled by a revocation, and get a slot', async () => {
    const tenant = await createTenant(t.app);
    const legacy = (n: number, disabledAt: Date | null) => ({
      _id: `hk_legacy${n}_${tenant.companyId}`,
      company_id: tenant.companyId,
      target_url: `${target_url}/legacy${n}`,
      event: '*',
      events: ['*'],
      events_key: '*',
      filter: null,
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      created_at: new Date(),
      disabled_at: disabledAt,
      failing_since: null,
    });
    await t.db.collection('hooks').insertMany([legacy(1, null), legacy(2, new Date())] as never[]);
    await HooksRepository.ensureIndexes(t.db);
    await HooksRepository.ensureIndexes(t.db); // a second start changes nothing
    const stored = await t.db.collection('hooks').find({ company_id: tenant.companyId }).sort({ _id: 1 }).toArray();
    expect(
      stored.map(({ created_by_key_id, disabled_reason, slot }) => ({ created_by_key_id, disabled_reason, slot })),
    ).toEqual([
      { created_by_key_id: null, disabled_reason: null, slot: 0 },
      { created_by_key_id: null, disabled_reason: 'failing', slot: 1 },
    ]);

    // The tenant's key (which did not create them) is revoked: they are untouched.
    await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/api-keys/${tenant.keyId}`, undefined, 204);
    const listed = (await admin(t.app, 'GET', `/companies/${tenant.companyId}/hooks`, undefined, 200)).json();
    expect(
      listed.map((hook: Record<string, unknown>) => [hook.created_by_key_id, hook.enabled, hook.disabled_reason]),
    ).toEqual([
      [null, true, null],
      [null, false, 'failing'],
    ]);
    expect(await fannedOutTo(tenant, 'item.created')).toEqual([stored[0]!._id]);
  });
});
