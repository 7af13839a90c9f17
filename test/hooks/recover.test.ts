import { describe, expect, it } from 'vitest';
import { must } from '../../src/shared/must.js';
import { createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { hooksTestEnv } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';
import type { Receiver } from './receiver.js';

// One attempt per delivery, so a failure is final; one in flight per hook, so arrival order is send order.
const env = hooksTestEnv({ HOOK_MAX_ATTEMPTS: '1', HOOK_MAX_IN_FLIGHT_PER_HOOK: '1' });

const recover = (tenant: Tenant, hookId: string, body: unknown) =>
  ext(env.t.app, tenant.key, 'POST', `/hooks/${hookId}/recover`, body);

const deliveriesOf = async (tenant: Tenant, hookId: string, query = '') => {
  const response = await ext(env.t.app, tenant.key, 'GET', `/hooks/${hookId}/deliveries${query}`);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<Array<{ event_id: string; succeeded: boolean; attempt: number }>>();
};

const sequenceOf = (receiver: Receiver) => receiver.requests.map((request) => JSON.parse(request.body).sequence);

const recovered = async (hookId: string) =>
  waitFor(
    async () => (await env.t.db.collection('hook_recoveries').findOne({ _id: hookId as never }))?.status === 'done',
  );

describe('POST /v1/ext/hooks/{hook_id}/recover (DECISIONS.md 13.2)', () => {
  it('sends again, in sequence order, every event the hook missed in the period, and nothing it received', async () => {
    const tenant = await createTenant(env.t.app);
    let down = false;
    const receiver = await env.receiver(() => (down ? 503 : 200));
    const hook = await env.subscribe(tenant, { target_url: receiver.url(), events: ['task.created'] });
    const since = new Date(Date.now() - 1_000).toISOString();
    const before = await createTask(env.t.app, tenant, { title: 'before the outage' });
    await waitFor(() => receiver.requests.length === 1);

    down = true;
    const missed: string[] = [];
    for (let i = 0; i < 6; i++) missed.push((await createTask(env.t.app, tenant, { title: `missed ${i}` })).task_id);
    await waitFor(() => receiver.requests.length === 7);
    // An item event in the period is not one of the hook's types.
    await ext(env.t.app, tenant.key, 'POST', '/items', {
      name: 'Deal',
      pipeline_id: tenant.pipelineId,
      stage_id: tenant.stageIds[0],
    });
    const failed = must(
      await waitFor(async () => {
        const listed = await deliveriesOf(tenant, hook.hook_id, '?status=failed');
        return listed.length === 6 ? listed : undefined;
      }),
      'the failed deliveries',
    );
    expect(failed.every((attempt) => !attempt.succeeded)).toBe(true);

    down = false;
    const answer = await recover(tenant, hook.hook_id, { since });
    expect(answer.statusCode, answer.body).toBe(202);
    expect(answer.json()).toMatchObject({ hook_id: hook.hook_id, since: expect.any(String), queued: 6 });
    await waitFor(() => receiver.requests.length === 13);
    await recovered(hook.hook_id);
    const resent = receiver.requests.slice(7).map((request) => JSON.parse(request.body));
    expect(resent.map((event) => event.data.task_id)).toEqual(missed);
    const sequences = sequenceOf(receiver).slice(7);
    expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
    // The same webhook-id as the failed attempts; the one received before the outage was not sent again.
    expect(new Set(receiver.requests.slice(7).map((request) => request.id))).toEqual(
      new Set(failed.map((attempt) => attempt.event_id)),
    );
    expect(resent.map((event) => event.data.task_id)).not.toContain(before.task_id);
    expect(await deliveriesOf(tenant, hook.hook_id, '?status=failed')).toEqual([]);
    expect(await deliveriesOf(tenant, hook.hook_id, '?status=succeeded')).toHaveLength(7 + 6);

    // Nothing left to recover: a second recovery of the period sends nothing.
    const again = await recover(tenant, hook.hook_id, { since });
    expect(again.json().queued).toBe(0);
  });

  it('includes events never attempted (the hook was disabled) and follows the hook filter', async () => {
    const tenant = await createTenant(env.t.app);
    const receiver = await env.receiver();
    const hook = await env.subscribe(tenant, {
      target_url: receiver.url(),
      events: ['task.updated', 'task.created'],
      filter: { changes: { priority: { to: 'urgent' } } },
    });
    const since = new Date(Date.now() - 1_000).toISOString();
    const off = await ext(env.t.app, tenant.key, 'PATCH', `/hooks/${hook.hook_id}`, { enabled: false });
    expect(off.json().enabled).toBe(false);
    const task = await createTask(env.t.app, tenant, { title: 'while disabled' });
    for (const priority of ['high', 'urgent', 'low'])
      expect((await ext(env.t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { priority })).statusCode).toBe(200);
    // All four readable in the feed (a recovery covers what is readable when it starts).
    await waitFor(async () => {
      const feed = await ext(env.t.app, tenant.key, 'GET', `/events?resource_id=${task.task_id}`);
      return feed.json().length === 4;
    });
    expect(receiver.requests).toHaveLength(0);

    // Recovering re-enables the hook, like a redelivery; the renamed-priority updates other than "urgent" stay out.
    const answer = await recover(tenant, hook.hook_id, { since });
    expect(answer.statusCode, answer.body).toBe(202);
    expect(answer.json().queued).toBe(2);
    await waitFor(() => receiver.requests.length === 2);
    await recovered(hook.hook_id);
    const got = receiver.requests.map((request) => JSON.parse(request.body));
    expect(got.map((event) => event.type)).toEqual(['task.created', 'task.updated']);
    expect(got[1].changes.priority).toEqual({ from: 'high', to: 'urgent' });
    expect((await ext(env.t.app, tenant.key, 'GET', '/hooks')).json()[0].enabled).toBe(true);
  });

  it('one recovery per hook at a time: a second one while it runs is 409 recovery_in_progress', async () => {
    const tenant = await createTenant(env.t.app);
    const receiver = await env.receiver(() => ({ status: 200, delayMs: 150 }));
    const since = new Date(Date.now() - 1_000).toISOString();
    for (let i = 0; i < 8; i++) await createTask(env.t.app, tenant, { title: `old ${i}` });
    await waitFor(async () => (await ext(env.t.app, tenant.key, 'GET', '/events')).json().length === 8);
    // Subscribed after the events: none was ever attempted.
    const hook = await env.subscribe(tenant, { target_url: receiver.url(), events: ['task.created'] });
    const first = await recover(tenant, hook.hook_id, { since });
    expect(first.statusCode, first.body).toBe(202);
    expect(first.json().queued).toBe(8);
    const second = await recover(tenant, hook.hook_id, { since });
    const problem = expectProblem(second, 409, 'recovery_in_progress');
    expect(problem).toMatchObject({ hook_id: hook.hook_id, since: first.json().since, until: first.json().until });
    await waitFor(() => receiver.requests.length === 8);
    await recovered(hook.hook_id);
    expect((await recover(tenant, hook.hook_id, { since })).statusCode).toBe(202); // finished: another may start
    expect(new Set(receiver.requests.map((request) => request.id)).size).toBe(8);
  });

  it('refuses a period outside retention, since not before until, bad fields, and foreign hooks', async () => {
    const tenant = await createTenant(env.t.app);
    const hook = await env.subscribe(tenant, { target_url: 'http://127.0.0.1:9/r', event: '*' });
    const paths = async (body: unknown) =>
      expectProblem(await recover(tenant, hook.hook_id, body), 400, 'validation_failed').errors.map(
        (error: { path: string }) => error.path,
      );
    const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
    expect(await paths({ since: daysAgo(31) })).toEqual(['since']); // EVENTS_RETENTION_DAYS: 30
    expect(await paths({ since: daysAgo(40), until: daysAgo(35) })).toEqual(['since']);
    expect(await paths({ since: daysAgo(1), until: daysAgo(2) })).toEqual(['since']);
    const dayAgo = daysAgo(1); // one instant for both: two calls may fall a millisecond apart
    expect(await paths({ since: dayAgo, until: dayAgo })).toEqual(['since']);
    expect(await paths({ since: new Date(Date.now() + 60_000).toISOString() })).toEqual(['since']);
    expect(await paths({})).toEqual(['since']);
    expect(await paths({ since: 'last tuesday' })).toEqual(['since']);
    expect(await paths({ since: daysAgo(1), hook_id: 'x' })).toEqual(['hook_id']);
    const stranger = await createTenant(env.t.app);
    expectProblem(await recover(stranger, hook.hook_id, { since: daysAgo(1) }), 404, 'not_found');
    expectProblem(await recover(tenant, 'hk_000000000000000000000000', { since: daysAgo(1) }), 404, 'not_found');
    // Nothing was started by any of these.
    expect(await env.t.db.collection('hook_recoveries').countDocuments({ _id: hook.hook_id as never })).toBe(0);
  });
});
