import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildEvent } from '../../src/contracts/envelope.js';
import { DeliveriesRepository, HOOK_STATUS_INDEX } from '../../src/hooks/deliveries.repository.js';
import { buildTestApp, uniqueName, type TestApp } from '../helpers/app.js';
import { createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => t?.close());

const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000);

/** One delivery to the hook: its attempts at these times, each failing but the last when `succeeded`. */
async function delivery(
  hookId: string,
  tenant: Tenant,
  outcome: 'succeeded' | 'failed' | 'pending',
  at: Date,
): Promise<string> {
  const event = buildEvent('task.created', tenant.companyId, {});
  const key = `${hookId}:${event.event_id}`;
  const job = { id: `${key}:event`, target: { kind: 'hook' as const, hook_id: hookId } };
  const target = { hook_id: hookId, automation_id: null };
  await t.app.repos.deliveries.recordAttempt({
    key,
    target,
    event,
    attempt: {
      attempt: 1,
      status_code: outcome === 'succeeded' ? 200 : 500,
      error: outcome === 'succeeded' ? null : 'http_status',
      duration_ms: 3,
      succeeded: outcome === 'succeeded',
      next_retry_at: outcome === 'pending' ? new Date(at.getTime() + 3_600_000) : null,
      attempted_at: at,
    },
    job,
  });
  return event.event_id;
}

describe('GET /v1/ext/hooks/{hook_id}/deliveries?status=&since=&until= (DECISIONS.md 13.2)', () => {
  it('narrows to deliveries by their status and by when their latest attempt was', async () => {
    const tenant = await createTenant(t.app);
    const hook = (
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: 'https://hooks.example.com/a', event: '*' })
    ).json();
    const ok = await delivery(hook.hook_id, tenant, 'succeeded', minutesAgo(50));
    const failedOld = await delivery(hook.hook_id, tenant, 'failed', minutesAgo(40));
    const failedNew = await delivery(hook.hook_id, tenant, 'failed', minutesAgo(10));
    const waiting = await delivery(hook.hook_id, tenant, 'pending', minutesAgo(5));
    // A delivery handed to the deliveries lane before its first attempt waits too.
    const scheduled = buildEvent('task.updated', tenant.companyId, {});
    await t.app.repos.deliveries.recordScheduled({
      key: `${hook.hook_id}:${scheduled.event_id}`,
      target: { hook_id: hook.hook_id, automation_id: null },
      event: scheduled,
      job: {
        id: `${hook.hook_id}:${scheduled.event_id}:event`,
        event: scheduled,
        target: { kind: 'hook', hook_id: hook.hook_id },
      },
    });

    const list = async (query: string) => {
      const response = await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries${query}`);
      expect(response.statusCode, response.body).toBe(200);
      return response.json().map((attempt: { event_id: string }) => attempt.event_id);
    };
    expect(await list('?status=failed')).toEqual([failedNew, failedOld]);
    expect(await list('?status=succeeded')).toEqual([ok]);
    expect(await list('?status=pending')).toEqual([waiting]); // the scheduled one has no attempt to show yet
    expect(await list('')).toEqual([waiting, failedNew, failedOld, ok]);
    const since = encodeURIComponent(minutesAgo(45).toISOString());
    const until = encodeURIComponent(minutesAgo(8).toISOString());
    expect(await list(`?since=${since}`)).toEqual([waiting, failedNew, failedOld]);
    expect(await list(`?since=${since}&until=${until}`)).toEqual([failedNew, failedOld]);
    expect(await list(`?status=failed&until=${encodeURIComponent(minutesAgo(20).toISOString())}`)).toEqual([failedOld]);
    // Any offset is accepted.
    expect(await list(`?status=succeeded&since=${encodeURIComponent('2020-01-01T01:00:00+01:00')}`)).toEqual([ok]);

    // A failed delivery that is sent again successfully is succeeded from then on.
    await t.app.repos.deliveries.recordAttempt({
      key: `${hook.hook_id}:${failedOld}`,
      target: { hook_id: hook.hook_id, automation_id: null },
      event: buildEvent('task.created', tenant.companyId, {}),
      attempt: {
        attempt: 2,
        status_code: 200,
        error: null,
        duration_ms: 3,
        succeeded: true,
        next_retry_at: null,
        attempted_at: new Date(),
      },
      job: { id: `${hook.hook_id}:${failedOld}:redeliver-1`, target: { kind: 'hook', hook_id: hook.hook_id } },
    });
    expect(await list('?status=failed')).toEqual([failedNew]);
  });

  it('refuses a bad status, a bad timestamp and since after until, naming the parameter', async () => {
    const tenant = await createTenant(t.app);
    const hook = (
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: 'https://hooks.example.com/b', event: '*' })
    ).json();
    const paths = async (query: string) =>
      expectProblem(
        await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries${query}`),
        400,
        'validation_failed',
      ).errors.map((error: { path: string }) => error.path);
    expect(await paths('?status=lost')).toEqual(['status']);
    expect(await paths('?since=yesterday')).toEqual(['since']);
    expect(await paths('?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z')).toEqual(['since']);
    expect(await paths('?until=2026-12-01T00:00:00Z&colour=red')).toEqual(['colour']);
    // Another company's hook stays 404 whatever the query.
    const stranger = await createTenant(t.app);
    expectProblem(
      await ext(t.app, stranger.key, 'GET', `/hooks/${hook.hook_id}/deliveries?status=failed`),
      404,
      'not_found',
    );
  });

  it('records stored before statuses get theirs at start', async () => {
    // A database as the release before left it: records without status, and never started with this code.
    const db = t.mongoClient.db(uniqueName('t'));
    const deliveries = db.collection('deliveries');
    const base = { company_id: 'cmp_old', hook_id: 'hook_old', event_type: 'task.created', updated_at: new Date() };
    const attempt = (succeeded: boolean) => ({ attempt: 1, succeeded, attempted_at: new Date() });
    await deliveries.insertMany([
      { _id: 'old:due', ...base, event: {}, attempts: [attempt(false)], next_attempt_at: new Date() },
      { _id: 'old:delivered', ...base, attempts: [attempt(true)] },
      { _id: 'old:failed', ...base, event: {}, attempts: [attempt(true), attempt(false)], next_attempt_at: null },
    ] as never[]);
    await DeliveriesRepository.ensureIndexes(db);
    const statuses = await deliveries.find({ company_id: 'cmp_old' }).sort({ _id: 1 }).toArray();
    expect(statuses.map((doc) => [doc._id, doc.status])).toEqual([
      ['old:delivered', 'succeeded'],
      ['old:due', 'pending'],
      ['old:failed', 'failed'],
    ]);
    await db.dropDatabase();
  });
});

const realMongo = inject('mongoKind') !== 'standin';
describe.skipIf(!realMongo)('deliveries list plan on a real MongoDB', () => {
  it('a status filter is served by the hook_status index, without a scan or an in-memory sort', async () => {
    const explained = (await t.app.repos.deliveries
      .recentCursor('cmp_x', 'hook_x', { status: 'failed', since: minutesAgo(60) }, 100)
      .explain()) as { queryPlanner: { winningPlan: unknown } };
    const plan = JSON.stringify(explained.queryPlanner.winningPlan);
    expect(plan).toContain(HOOK_STATUS_INDEX);
    expect(plan).not.toContain('COLLSCAN');
    expect(plan).not.toContain('"SORT"');
  });
});
