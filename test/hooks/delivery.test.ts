import { beforeAll, describe, expect, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import { must } from '../../src/shared/must.js';
import { createQueue } from '../../src/shared/queues.js';
import { ENVELOPE_KEYS, taskData } from '../helpers/events.js';
import { admin, createItem, createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { eventIdsOf, hooksTestEnv, eventsFinished } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';
import { verifyWebhook } from './receiver.js';
import type { TestApp } from '../helpers/app.js';

const env = hooksTestEnv({ HOOK_BACKOFF_MS: '100' }, ['relay', 'automations', 'hooks']);
const receiver = () => env.receiver();
const subscribe = (tenant: Tenant, target_url: string, event = 'task.created') =>
  env.subscribe(tenant, { target_url, event });
let t: TestApp;
beforeAll(() => {
  t = env.t;
});

describe('REST hook delivery', () => {
  it('delivers task.created signed per Standard Webhooks, and nothing after unsubscribing', async () => {
    const tenant = await createTenant(t.app);
    const inbox = await receiver();
    const hook = await subscribe(tenant, inbox.url());
    expect(hook).toMatchObject({
      hook_id: expect.any(String),
      target_url: inbox.url(),
      event: 'task.created',
      disabled_at: null,
    });
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);

    const task = await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length === 1);
    const request = must(inbox.requests[0], 'the delivered request');
    expect(request.headers['content-type']).toBe('application/json');
    expect(Number(request.headers['webhook-timestamp'])).toBeCloseTo(Date.now() / 1000, -1);
    const payload = verifyWebhook(hook.secret, request) as Record<string, unknown>;
    expect(Object.keys(payload).sort()).toEqual(ENVELOPE_KEYS);
    expect(payload).toEqual({
      event_id: request.id,
      type: 'task.created',
      company_id: tenant.companyId,
      occurred_at: expect.any(String),
      sequence: 1,
      actor: { type: 'api_key', id: tenant.keyId },
      data: task,
    });
    expect(() => verifyWebhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`, request)).toThrow();

    const attempts = await waitFor(async () => {
      const listed = (await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json();
      return listed.length === 1 ? listed : undefined;
    });
    expect(attempts).toEqual([
      {
        event_id: request.id,
        type: 'task.created',
        event_type: 'task.created',
        attempt: 1,
        succeeded: true,
        response_status: 200,
        response_body: '',
        error: null,
        duration_ms: expect.any(Number),
        next_attempt_at: null,
        attempted_at: expect.stringMatching(/Z$/),
        status_code: 200,
        next_retry_at: null,
      },
    ]);

    expect((await ext(t.app, tenant.key, 'DELETE', `/hooks/${hook.hook_id}`)).statusCode).toBe(204);
    const after = await createTask(t.app, tenant);
    await eventsFinished(t, 'hook-fanout', await eventIdsOf(t, after.task_id)); // its fan-out is over
    expect(inbox.requests).toHaveLength(1);
  });

  it("a hook subscribed while the worker holds the company's hooks in its cache gets the very next event", async () => {
    const tenant = await createTenant(t.app);
    const first = await receiver();
    await subscribe(tenant, first.url());
    await createTask(t.app, tenant);
    await waitFor(() => first.requests.length === 1); // the worker has now read and cached the company's hooks
    const second = await receiver();
    await subscribe(tenant, second.url());
    await createTask(t.app, tenant);
    await waitFor(() => second.requests.length === 1 && first.requests.length === 2);
  });

  it('delivers only the subscribed event type, and every type to *', async () => {
    const tenant = await createTenant(t.app);
    const completedOnly = await receiver();
    const everything = await receiver();
    await subscribe(tenant, completedOnly.url(), 'task.completed');
    await subscribe(tenant, everything.url(), '*');
    const task = await createTask(t.app, tenant);
    await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { is_completed: true });
    await createItem(t.app, tenant);
    await waitFor(() => everything.requests.length === 4);
    const types = everything.requests.map((request) => JSON.parse(request.body).type).sort();
    expect(types).toEqual(['item.created', 'task.completed', 'task.created', 'task.updated']);
    await waitFor(() => completedOnly.requests.length === 1);
    await eventsFinished(
      t,
      'hook-fanout',
      everything.requests.map((request) => request.id),
    ); // every event's fan-out is over
    expect(completedOnly.requests.map((request) => JSON.parse(request.body).type)).toEqual(['task.completed']);
  });

  it('a duplicate event does not double-deliver', async () => {
    const tenant = await createTenant(t.app);
    const inbox = await receiver();
    await subscribe(tenant, inbox.url());
    await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length === 1);
    const event = JSON.parse(must(inbox.requests[0], 'the delivered request').body);
    // The same event published again under another job id reaches the fan-out a second time.
    const fanout = createQueue('hook-fanout', { connection: t.redis, prefix: t.config.QUEUE_PREFIX });
    await fanout.add(event.type, event, { jobId: `again-${event.event_id}` });
    await waitFor(async () => (await fanout.getJobState(`again-${event.event_id}`)) === 'completed');
    await fanout.close();
    // A later event reaches the hook: the copy's fan-out (completed above) sent nothing before it.
    await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length >= 2);
    expect(inbox.requests).toHaveLength(2);
    expect(inbox.requests[1]?.id).not.toBe(event.event_id);
  });

  it("an event added twice under job ids of its own (not the publisher's) is delivered once", async () => {
    const tenant = await createTenant(t.app);
    const inbox = await receiver();
    await subscribe(tenant, inbox.url());
    const event = { ...buildEvent('task.created', tenant.companyId, taskData({ task_id: 'tsk_copied' })), sequence: 1 };
    const fanout = createQueue('hook-fanout', { connection: t.redis, prefix: t.config.QUEUE_PREFIX });
    await fanout.addBulk(
      ['copy-1', 'copy-2'].map((id) => ({ name: event.type, data: event, opts: { jobId: `${id}-${event.event_id}` } })),
    );
    await waitFor(
      async () =>
        (await fanout.getJobState(`copy-2-${event.event_id}`)) === 'completed' &&
        (await fanout.getJobState(`copy-1-${event.event_id}`)) === 'completed',
    );
    await fanout.close();
    // Both copies' fan-outs completed above; a later event reaching the hook shows nothing else was on its way.
    await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length >= 2);
    expect(inbox.requests.map((request) => request.id)).toEqual([event.event_id, expect.any(String)]);
    expect(inbox.requests[1]?.id).not.toBe(event.event_id);
  });

  it('subscribing again to the same target and event answers 409 hook_exists naming the same hook', async () => {
    const tenant = await createTenant(t.app);
    const first = await subscribe(tenant, 'http://127.0.0.1:9/a');
    const again = await ext(t.app, tenant.key, 'POST', '/hooks', {
      target_url: 'http://127.0.0.1:9/a',
      event: 'task.created',
    });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'hook_exists', hook_id: first.hook_id });
    const other = await subscribe(tenant, 'http://127.0.0.1:9/a', '*');
    expect(other.hook_id).not.toBe(first.hook_id);
    expect((await ext(t.app, tenant.key, 'GET', '/hooks')).json()).toHaveLength(2);
  });

  it('automation webhook actions go through the same signed delivery, with the company webhook secret', async () => {
    const tenant = await createTenant(t.app);
    const inbox = await receiver();
    await admin(
      t.app,
      'POST',
      `/companies/${tenant.companyId}/automations`,
      {
        name: 'notify',
        trigger: 'task.created',
        actions: [{ type: 'webhook', url: inbox.url('/automation') }],
      },
      201,
    );
    const task = await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length === 1);
    const { secret } = (
      await admin(t.app, 'GET', `/companies/${tenant.companyId}/automation-webhook-secret`, undefined, 200)
    ).json();
    expect(secret).toMatch(/^whsec_/);
    const payload = verifyWebhook(secret, must(inbox.requests[0], 'the delivered request')) as {
      type: string;
      data: unknown;
    };
    expect(payload).toMatchObject({ type: 'task.created', data: task });
    const record = await waitFor(() =>
      t.db.collection('deliveries').findOne({ company_id: tenant.companyId, automation_id: { $ne: null } }),
    );
    expect(record!.attempts).toEqual([expect.objectContaining({ attempt: 1, status_code: 200, succeeded: true })]);
  });
});
