import { beforeAll, describe, expect, it } from 'vitest';
import { must } from '../../src/shared/must.js';
import {
  createItem,
  createKey,
  createTask,
  createTenant,
  expectProblem,
  ext,
  type Tenant,
} from '../helpers/fixtures.js';
import { hooksTestEnv } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';
import { verifyWebhook } from './receiver.js';
import type { TestApp } from '../helpers/app.js';
import type { Receiver, Received } from './receiver.js';

const env = hooksTestEnv({ HOOK_BACKOFF_MS: '100' });
const receiver = () => env.receiver();
const subscribe = (tenant: Tenant, body: Record<string, unknown>) => env.subscribe(tenant, body);
let t: TestApp;
beforeAll(() => {
  t = env.t;
});

/** POST /hooks/{id}/test, then the request the receiver got for it. */
async function ping(tenant: Tenant, hookId: string, inbox: Receiver): Promise<Received> {
  const response = await ext(t.app, tenant.key, 'POST', `/hooks/${hookId}/test`);
  expect(response.statusCode, response.body).toBe(202);
  const { event_id } = response.json();
  return arrived(inbox, (request) => request.id === event_id);
}

/** The first request the receiver got that matches, once it arrives. */
async function arrived(inbox: Receiver, matches: (request: Received) => boolean): Promise<Received> {
  return must(await waitFor(() => inbox.requests.find(matches)), 'the delivered request');
}

const signatures = (request: Received) => String(request.headers['webhook-signature']).split(' ');

describe('test ping', () => {
  it('sends hook.ping { hook_id } signed like any event, answers 202 with its event_id, and lists it', async () => {
    const tenant = await createTenant(t.app);
    const inbox = await receiver();
    const hook = await subscribe(tenant, { target_url: inbox.url(), events: ['task.created', 'item.created'] });
    const response = await ext(t.app, tenant.key, 'POST', `/hooks/${hook.hook_id}/test`);
    expect(response.statusCode).toBe(202);
    expect(response.json()).toEqual({
      hook_id: hook.hook_id,
      event_id: expect.stringMatching(/^evt_/),
      status: 'queued',
    });
    const { event_id } = response.json();
    const request = await arrived(inbox, (received) => received.id === event_id);
    expect(verifyWebhook(hook.secret, request)).toEqual({
      event_id,
      type: 'hook.ping',
      company_id: tenant.companyId,
      occurred_at: expect.stringMatching(/Z$/),
      actor: { type: 'api_key', id: tenant.keyId },
      data: { hook_id: hook.hook_id },
    });
    const listed = await waitFor(async () => {
      const attempts = (await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json();
      return attempts.length === 1 ? attempts : undefined;
    });
    expect(listed[0]).toMatchObject({ event_id, event_type: 'hook.ping', attempt: 1, succeeded: true });
    // A ping is no company event: the events feed does not show it.
    const feed = (await ext(t.app, tenant.key, 'GET', '/events')).json<Array<{ type: string }>>();
    expect(feed.map((event) => event.type)).not.toContain('hook.ping');
  });
});

describe('secret rotation', () => {
  it('both secrets sign for the overlap (two v1 signatures), then only the new one', async () => {
    const tenant = await createTenant(t.app);
    const inbox = await receiver();
    const item = await createItem(t.app, tenant);
    const hook = await subscribe(tenant, {
      target_url: inbox.url(),
      events: ['task.created', 'item.updated'],
      filter: { pipeline_id: tenant.pipelineId },
    });
    const before = Date.now();
    const rotated = await ext(t.app, tenant.key, 'POST', `/hooks/${hook.hook_id}/rotate-secret`);
    expect(rotated.statusCode, rotated.body).toBe(200);
    const rotation = rotated.json();
    expect(Object.keys(rotation)).toEqual(['hook_id', 'secret', 'previous_secret_expires_at']);
    expect(rotation.hook_id).toBe(hook.hook_id);
    expect(rotation.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(rotation.secret).not.toBe(hook.secret);
    const expiresAt = Date.parse(rotation.previous_secret_expires_at);
    expect(expiresAt - before).toBeGreaterThanOrEqual(24 * 3600 * 1000);
    expect(expiresAt - before).toBeLessThan(24 * 3600 * 1000 + 60_000);
    // The list never shows either secret.
    const listed = await ext(t.app, tenant.key, 'GET', '/hooks');
    expect(listed.body).not.toContain(rotation.secret);
    expect(listed.body).not.toContain(hook.secret);

    // During the overlap: a real event (through the fan-out) and a ping, each verifiable with either secret.
    await createTask(t.app, tenant, { item_id: item.item_id });
    const event = await arrived(inbox, (request) => request.body.includes('"task.created"'));
    const pinged = await ping(tenant, hook.hook_id, inbox);
    for (const request of [event, pinged]) {
      expect(signatures(request)).toHaveLength(2);
      for (const signature of signatures(request)) expect(signature).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
      expect(verifyWebhook(rotation.secret, request)).toMatchObject({ event_id: request.id });
      expect(verifyWebhook(hook.secret, request)).toMatchObject({ event_id: request.id });
    }

    // After the overlap (its end moved into the past rather than waited for): only the new secret signs.
    await t.db
      .collection('hooks')
      .updateOne({ _id: hook.hook_id }, { $set: { previous_secret_expires_at: new Date(Date.now() - 1_000) } });
    const after = await ping(tenant, hook.hook_id, inbox);
    expect(signatures(after)).toHaveLength(1);
    expect(verifyWebhook(rotation.secret, after)).toMatchObject({ type: 'hook.ping' });
    expect(() => verifyWebhook(hook.secret, after)).toThrow();
  });

  it('rotating twice within the overlap stops the oldest secret at once: at most two are valid', async () => {
    const tenant = await createTenant(t.app);
    const inbox = await receiver();
    const hook = await subscribe(tenant, { target_url: inbox.url(), event: '*' });
    const second = (await ext(t.app, tenant.key, 'POST', `/hooks/${hook.hook_id}/rotate-secret`)).json();
    const third = (await ext(t.app, tenant.key, 'POST', `/hooks/${hook.hook_id}/rotate-secret`)).json();
    expect(new Set([hook.secret, second.secret, third.secret]).size).toBe(3);
    const request = await ping(tenant, hook.hook_id, inbox);
    expect(signatures(request)).toHaveLength(2);
    expect(verifyWebhook(third.secret, request)).toMatchObject({ type: 'hook.ping' });
    expect(verifyWebhook(second.secret, request)).toMatchObject({ type: 'hook.ping' });
    expect(() => verifyWebhook(hook.secret, request)).toThrow();
  });
});

describe('rotate and test: scope and ownership', () => {
  it("another company's hook, an unknown and a deleted hook are 404; a key without hooks:manage is 403", async () => {
    const owner = await createTenant(t.app);
    const stranger = await createTenant(t.app);
    const hook = await subscribe(owner, { target_url: 'http://127.0.0.1:9/x', event: '*' });
    const gone = await subscribe(owner, { target_url: 'http://127.0.0.1:9/gone', event: '*' });
    expect((await ext(t.app, owner.key, 'DELETE', `/hooks/${gone.hook_id}`)).statusCode).toBe(204);
    for (const action of ['rotate-secret', 'test']) {
      expectProblem(await ext(t.app, stranger.key, 'POST', `/hooks/${hook.hook_id}/${action}`), 404, 'not_found');
      expectProblem(
        await ext(t.app, owner.key, 'POST', `/hooks/hk_000000000000000000000000/${action}`),
        404,
        'not_found',
      );
      expectProblem(await ext(t.app, owner.key, 'POST', `/hooks/${gone.hook_id}/${action}`), 404, 'not_found');
    }
    const readOnly = await createKey(t.app, owner.companyId, owner.userId, ['items:read', 'tasks:read']);
    for (const action of ['rotate-secret', 'test'])
      expectProblem(
        await ext(t.app, readOnly.key, 'POST', `/hooks/${hook.hook_id}/${action}`),
        403,
        'insufficient_scope',
      );
    // The stranger's attempts changed nothing: the owner's secret still signs alone.
    const stored = await t.db.collection('hooks').findOne({ _id: hook.hook_id });
    expect(stored).toMatchObject({ secret: hook.secret });
    expect(stored?.previous_secret ?? null).toBeNull();
  });
});
