import { beforeAll, describe, expect, it } from 'vitest';
import { hookDeliveryJobId } from '../../src/hooks/fanout.js';
import { must } from '../../src/shared/must.js';
import { createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { eventIdsOf, hooksTestEnv, eventsFinished, jobsDone } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';
import type { TestApp } from '../helpers/app.js';
import type { Answer } from './receiver.js';

const env = hooksTestEnv({ HOOK_BACKOFF_MS: '100', HOOK_MAX_ATTEMPTS: '3', HOOK_TIMEOUT_MS: '400' });
let t: TestApp;
beforeAll(() => {
  t = env.t;
});

/** A tenant with one task.created hook to a receiver that answers as told. */
async function hookTo(answer: (index: number) => Answer) {
  const tenant = await createTenant(t.app);
  const inbox = await env.receiver((_, index) => answer(index));
  const hook = await env.subscribe(tenant, { target_url: inbox.url(), event: 'task.created' });
  return { tenant, inbox, hook };
}

async function attemptsOf(tenant: Tenant, hookId: string, count: number) {
  return waitFor(async () => {
    const listed = (await ext(t.app, tenant.key, 'GET', `/hooks/${hookId}/deliveries`)).json();
    return listed.length === count ? listed : undefined;
  });
}

describe('retries', () => {
  it('retries 500s with growing delays until the receiver answers 200', async () => {
    const { tenant, inbox, hook } = await hookTo((index) => (index < 2 ? 500 : 200));
    await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length === 3);
    const first = must(inbox.requests[0], 'attempt 1');
    const second = must(inbox.requests[1], 'attempt 2');
    const third = must(inbox.requests[2], 'attempt 3');
    expect(new Set(inbox.requests.map((request) => request.id)).size).toBe(1);
    expect(new Set(inbox.requests.map((request) => request.remotePort)).size).toBe(1); // one keep-alive connection
    // The receiver never hears a retry before its delay (load can only add to the gaps).
    expect(second.at - first.at).toBeGreaterThanOrEqual(80 - 5); // 100 ms -20%
    expect(third.at - second.at).toBeGreaterThanOrEqual(160 - 5); // doubled, -20%

    const attempts = await attemptsOf(tenant, hook.hook_id, 3);
    expect(
      attempts.map((a: { attempt: number; status_code: number; succeeded: boolean }) => [
        a.attempt,
        a.status_code,
        a.succeeded,
      ]),
    ).toEqual([
      [3, 200, true],
      [2, 500, false],
      [1, 500, false],
    ]);
    expect(attempts[0].next_retry_at).toBeNull();
    // The scheduled delays: 100 ms then 200 ms, each ±20% (plus a little for the bookkeeping between
    // the attempt's end and the scheduling, which a busy machine stretches: up to 60 ms, still short of
    // the next doubling, so a wrong schedule fails here).
    const scheduled = (a: { next_retry_at: string; attempted_at: string; duration_ms: number }) =>
      Date.parse(a.next_retry_at) - Date.parse(a.attempted_at) - a.duration_ms;
    expect(scheduled(attempts[2])).toBeGreaterThanOrEqual(80 - 2);
    expect(scheduled(attempts[2])).toBeLessThanOrEqual(120 + 60);
    expect(scheduled(attempts[1])).toBeGreaterThanOrEqual(160 - 2);
    expect(scheduled(attempts[1])).toBeLessThanOrEqual(240 + 60);
    // The delivery job is over (delivered on its third attempt): no fourth attempt can follow.
    await jobsDone(t, 'deliveries', [hookDeliveryJobId(hook.hook_id, must(inbox.requests[0], 'the first attempt').id)]);
    expect(inbox.requests).toHaveLength(3);
  });

  it('redelivers a failed delivery with the same webhook-id, after the attempts ran out', async () => {
    let healthy = false;
    const { tenant, inbox, hook } = await hookTo(() => (healthy ? 200 : 503));
    await createTask(t.app, tenant);
    const failed = await attemptsOf(tenant, hook.hook_id, 3);
    expect(failed.every((attempt: { succeeded: boolean }) => !attempt.succeeded)).toBe(true);
    expect(failed[0]?.next_retry_at).toBeNull(); // HOOK_MAX_ATTEMPTS=3: given up
    const eventId = must(inbox.requests[0], 'the first attempt').id;

    healthy = true;
    const response = await ext(t.app, tenant.key, 'POST', `/hooks/${hook.hook_id}/deliveries/${eventId}/redeliver`);
    expect(response.statusCode, response.body).toBe(202);
    expect(response.json()).toEqual({ hook_id: hook.hook_id, event_id: eventId, status: 'queued' });
    await waitFor(() => inbox.requests.length === 4);
    expect(inbox.requests[3]?.id).toBe(eventId);
    expect((await attemptsOf(tenant, hook.hook_id, 4))[0]).toMatchObject({
      event_id: eventId,
      attempt: 1,
      status_code: 200,
      succeeded: true,
    });
    expectProblem(
      await ext(t.app, tenant.key, 'POST', `/hooks/${hook.hook_id}/deliveries/evt_000000000000000000000000/redeliver`),
      404,
      'not_found',
    );
  });

  it('redelivers a delivered event from the events store (its record keeps no envelope), and retries it from the record', async () => {
    // Delivered, then the redelivery fails once and its retry is delivered.
    const { tenant, inbox, hook } = await hookTo((index) => (index === 1 ? 500 : 200));
    await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length === 1);
    const delivered = must(inbox.requests[0], 'the delivery');
    const key = `${hook.hook_id}:${delivered.id}`;
    const record = await waitFor(() => t.db.collection('deliveries').findOne({ _id: key as never }));
    expect(record?.attempts).toHaveLength(1);
    expect(record).not.toHaveProperty('event');

    const response = await ext(
      t.app,
      tenant.key,
      'POST',
      `/hooks/${hook.hook_id}/deliveries/${delivered.id}/redeliver`,
    );
    expect(response.statusCode, response.body).toBe(202);
    await waitFor(() => inbox.requests.length === 3);
    for (const again of inbox.requests.slice(1)) {
      expect(again.id).toBe(delivered.id);
      expect(again.body).toBe(delivered.body);
    }
    // The failed attempt put the envelope in the record: what the reconciler sends from if Redis loses the retry.
    const retried = await t.db.collection('deliveries').findOne({ _id: key as never });
    expect(retried?.event).toMatchObject({ event_id: delivered.id, type: 'task.created' });
    expect((await attemptsOf(tenant, hook.hook_id, 3)).map((a: { succeeded: boolean }) => a.succeeded)).toEqual([
      true,
      false,
      true,
    ]);
  });

  it('honours a longer Retry-After on 429', async () => {
    const { tenant, inbox } = await hookTo((index) =>
      index === 0 ? { status: 429, headers: { 'retry-after': '1' } } : 200,
    );
    await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length === 2, 5_000);
    const first = must(inbox.requests[0], 'attempt 1');
    const second = must(inbox.requests[1], 'attempt 2');
    expect(second.at - first.at).toBeGreaterThanOrEqual(950);
  });

  it('does not follow redirects: a 3xx is a failed attempt', async () => {
    const { tenant, inbox, hook } = await hookTo((index) =>
      index === 0 ? { status: 302, headers: { location: 'http://127.0.0.1:1/elsewhere' } } : 200,
    );
    await createTask(t.app, tenant);
    const attempts = await attemptsOf(tenant, hook.hook_id, 2);
    expect(attempts[1]).toMatchObject({
      attempt: 1,
      status_code: 302,
      error: 'http_status',
      succeeded: false,
    });
    expect(attempts[0]).toMatchObject({ attempt: 2, status_code: 200, succeeded: true });
    expect(inbox.requests.map((request) => request.headers.host)).toEqual([
      `127.0.0.1:${inbox.port}`,
      `127.0.0.1:${inbox.port}`,
    ]);
  });

  it('410 Gone deletes the hook and nothing more is sent to it', async () => {
    const { tenant, inbox, hook } = await hookTo(() => 410);
    await createTask(t.app, tenant);
    await waitFor(() => inbox.requests.length === 1);
    await waitFor(async () => (await ext(t.app, tenant.key, 'GET', '/hooks')).json().length === 0);
    expectProblem(await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`), 404, 'not_found');
    const after = await createTask(t.app, tenant);
    await eventsFinished(t, 'hook-fanout', await eventIdsOf(t, after.task_id)); // its fan-out is over
    expect(inbox.requests).toHaveLength(1);
  });

  it('an attempt that gets no answer within HOOK_TIMEOUT_MS times out and is retried', async () => {
    const { tenant, inbox, hook } = await hookTo((index) => (index === 0 ? 'hang' : 200));
    await createTask(t.app, tenant);
    const attempts = await attemptsOf(tenant, hook.hook_id, 2);
    expect(attempts[1]).toMatchObject({
      attempt: 1,
      status_code: null,
      error: 'timeout',
      succeeded: false,
    });
    expect(attempts[1].duration_ms).toBeGreaterThanOrEqual(380);
    expect(attempts[0]).toMatchObject({ attempt: 2, status_code: 200, succeeded: true });
    expect(inbox.requests).toHaveLength(2);
  });
});
