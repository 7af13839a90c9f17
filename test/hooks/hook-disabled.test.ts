import { describe, expect, it } from 'vitest';
import { hookDisabledEvent } from '../../src/hooks/hook-events.js';
import { must } from '../../src/shared/must.js';
import { eventBytes, outboxOnUpdate } from '../../src/shared/outbox.js';
import { outboxBacklog, waitForFeed } from '../helpers/events.js';
import { createKey, createTask, createTenant, expectProblem, ext } from '../helpers/fixtures.js';
import { hooksTestEnv } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';

// The relay's pass (which moves what outboxes still hold) every 300 ms.
const env = hooksTestEnv({ HOOK_MAX_ATTEMPTS: '1', RECONCILE_INTERVAL_MS: '300' });

describe('hook.disabled (DECISIONS.md 13.2)', () => {
  it('a hook disabled after its failures tells the feed and the other hooks subscribed to it', async () => {
    const tenant = await createTenant(env.t.app);
    const failing = await env.receiver(() => 500);
    const listener = await env.receiver();
    const everything = await env.receiver();
    const pipelineOnly = await env.receiver();
    const doomed = await env.subscribe(tenant, {
      target_url: failing.url(),
      events: ['task.created', 'hook.disabled'],
    });
    await env.subscribe(tenant, { target_url: listener.url(), events: ['hook.disabled'] });
    await env.subscribe(tenant, { target_url: everything.url(), event: '*' });
    // A pipeline filter judges task and item events only: a hook event passes it.
    await env.subscribe(tenant, {
      target_url: pipelineOnly.url(),
      events: ['hook.disabled'],
      filter: { pipeline_id: tenant.pipelineId },
    });
    // Its deliveries have failed for more than 5 days: the next failure disables it.
    await env.t.db
      .collection('hooks')
      .updateOne({ _id: doomed.hook_id }, { $set: { failing_since: new Date(Date.now() - 6 * 86_400_000) } });
    await env.t.app.services.changes.hooks.announce(tenant.companyId);
    await createTask(env.t.app, tenant, { title: 'the last straw' });

    await waitFor(() => listener.requests.length >= 1);
    const event = JSON.parse(listener.requests[0]!.body);
    expect(event).toMatchObject({
      type: 'hook.disabled',
      company_id: tenant.companyId,
      sequence: expect.any(Number),
      actor: { type: 'system' },
      data: {
        hook_id: doomed.hook_id,
        target_url: failing.url(),
        events: ['task.created', 'hook.disabled'],
        enabled: false,
        disabled_reason: 'failing',
        disabled_at: expect.any(String),
      },
    });
    expect(listener.requests[0]!.body).not.toContain(doomed.secret);
    await waitFor(() => everything.requests.some((request) => request.id === event.event_id));
    await waitFor(() => pipelineOnly.requests.length === 1);
    // The disabled hook itself got only the task event that failed.
    expect(failing.requests.map((request) => JSON.parse(request.body).type)).toEqual(['task.created']);
    const stored = await env.t.db.collection('hooks').findOne({ _id: doomed.hook_id });
    expect(stored).toMatchObject({ disabled_reason: 'failing' });
    expect((await outboxBacklog(env.t.app)).hooks).toBe(0); // moved to the durable record at once: no hook holds it

    // The feed shows it to keys with hooks:manage, and to no other.
    const manager = await createKey(env.t.app, tenant.companyId, tenant.userId, ['hooks:manage']);
    const reader = await createKey(env.t.app, tenant.companyId, tenant.userId, ['tasks:read']);
    const managed = await ext(env.t.app, manager.key, 'GET', '/events');
    expect(managed.statusCode, managed.body).toBe(200);
    expect(managed.json().map((feedEvent: { event_id: string }) => feedEvent.event_id)).toEqual([event.event_id]);
    expect((await ext(env.t.app, manager.key, 'GET', `/events/${event.event_id}`)).json().data.hook_id).toBe(
      doomed.hook_id,
    );
    const read = await ext(env.t.app, reader.key, 'GET', '/events');
    expect(read.json().map((feedEvent: { type: string }) => feedEvent.type)).toEqual(['task.created']);
    expectProblem(await ext(env.t.app, reader.key, 'GET', '/events?type=hook.disabled'), 403, 'insufficient_scope');
    expectProblem(await ext(env.t.app, reader.key, 'GET', `/events/${event.event_id}`), 404, 'not_found');
  });

  it("a hook.disabled still in the hook's outbox (its process died after the disabling write) is moved by the relay", async () => {
    const tenant = await createTenant(env.t.app);
    const listener = await env.receiver();
    await env.subscribe(tenant, { target_url: listener.url(), events: ['hook.disabled'] });
    const doomed = await env.subscribe(tenant, { target_url: 'https://hooks.example.com/gone', event: 'task.created' });
    const stored = must(
      (await env.t.app.repos.hooks.findById(tenant.companyId, doomed.hook_id)) ?? undefined,
      'the hook',
    );
    const at = new Date();
    const event = hookDisabledEvent(stored, at);
    // What the disabling write leaves when nothing moves its event afterwards.
    await env.t.db.collection('hooks').updateOne({ _id: doomed.hook_id }, {
      $set: { disabled_at: at, disabled_reason: 'failing', ...outboxOnUpdate([event]).$set },
      $push: { pending_events: event },
      $inc: { outbox_bytes: eventBytes([event]) },
    } as never);
    await waitFor(() => listener.requests.some((request) => request.id === event.event_id), 15_000);
    expect(JSON.parse(listener.requests[0]!.body).data).toMatchObject({ hook_id: doomed.hook_id, enabled: false });
    // Moved once: the feed has it once, and no hook's outbox holds it any more (the outbox gauge).
    const feed = await waitForFeed(env.t.app, tenant.key, 'type=hook.disabled', 1);
    expect(feed.map((shown) => shown.event_id)).toEqual([event.event_id]);
    expect(await waitFor(async () => (await outboxBacklog(env.t.app)).hooks === 0)).toBe(true);
  });

  it('a hook disabled by its subscriber emits nothing', async () => {
    const tenant = await createTenant(env.t.app);
    const listener = await env.receiver();
    const hook = await env.subscribe(tenant, { target_url: 'https://hooks.example.com/off', event: 'task.created' });
    await env.subscribe(tenant, { target_url: listener.url(), events: ['hook.disabled', 'task.created'] });
    expect((await ext(env.t.app, tenant.key, 'PATCH', `/hooks/${hook.hook_id}`, { enabled: false })).statusCode).toBe(
      200,
    );
    await createTask(env.t.app, tenant); // the positive signal: the listener hears this one
    await waitFor(() => listener.requests.length >= 1);
    expect(listener.requests.map((request) => JSON.parse(request.body).type)).toEqual(['task.created']);
    expect(
      await env.t.db.collection('events').countDocuments({ company_id: tenant.companyId, type: 'hook.disabled' }),
    ).toBe(0);
  });
});
