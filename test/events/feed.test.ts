import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent, type EventEnvelope } from '../../src/contracts/envelope.js';
import { EventsRepository } from '../../src/events/repository.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { ENVELOPE_KEYS } from '../helpers/events.js';
import {
  createItem,
  createKey,
  createTask,
  createTenant,
  expectProblem,
  ext,
  type Tenant,
} from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' }, { publisher: true });
  tenant = await createTenant(t.app);
});
afterAll(async () => t?.close());

/** The company's readable feed position: with no gaps (a fresh company), how many events are readable. */
const recorded = async (companyId: string) =>
  ((await t.db.collection('event_sequences').findOne({ _id: companyId as never }))?.readable as number) ?? 0;

/** Every page of the feed, following x-next-cursor until a page comes back empty (it still has a cursor). */
async function allPages(key: string, query: string, limit: number): Promise<EventEnvelope[]> {
  const seen: EventEnvelope[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 10_000; pages++) {
    const url = `/events?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const response = await ext(t.app, key, 'GET', url);
    expect(response.statusCode, response.body).toBe(200);
    const page = response.json<EventEnvelope[]>();
    seen.push(...page);
    cursor = response.headers['x-next-cursor'] as string | undefined;
    expect(cursor).toBeTruthy();
    expect(response.headers.link).toContain('rel="next"');
    if (page.length === 0) return seen;
  }
  throw new Error('paging never ended');
}

describe('GET /v1/ext/events', () => {
  it('lists the events of API writes, oldest first, exactly as webhooks carry them', async () => {
    const task = await createTask(t.app, tenant, { title: 'Feed me' });
    await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { is_completed: true });
    const item = await createItem(t.app, tenant);
    expect(await waitFor(async () => (await recorded(tenant.companyId)) >= 4, 10_000)).toBeTruthy();

    const response = await ext(t.app, tenant.key, 'GET', '/events');
    expect(response.statusCode, response.body).toBe(200);
    const events = response.json<EventEnvelope[]>();
    expect(events.map((event) => event.type)).toEqual([
      'task.created',
      'task.updated',
      'task.completed',
      'item.created',
    ]);
    expect(Object.keys(events[0]!).sort()).toEqual(ENVELOPE_KEYS);
    expect(events.map((event) => (event as { sequence: number }).sequence)).toEqual([1, 2, 3, 4]);
    expect(events[0]).toMatchObject({
      actor: { type: 'api_key', id: tenant.keyId },
      company_id: tenant.companyId,
      data: { task_id: task.task_id, title: 'Feed me' },
    });
    expect(events[1]!.changes).toMatchObject({ is_completed: { from: false, to: true } });
    expect(events[3]!.data).toMatchObject({ item_id: item.item_id });

    const one = await ext(t.app, tenant.key, 'GET', `/events/${events[2]!.event_id}`);
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual(events[2]);

    const byResource = await ext(t.app, tenant.key, 'GET', `/events?resource_id=${task.task_id}&type=task.completed`);
    expect(byResource.json<EventEnvelope[]>().map((event) => event.event_id)).toEqual([events[2]!.event_id]);
    const between = await ext(
      t.app,
      tenant.key,
      'GET',
      `/events?occurred_after=${encodeURIComponent(events[0]!.occurred_at)}&occurred_before=2100-01-01`,
    );
    expect(between.json<EventEnvelope[]>().map((event) => event.type)).not.toContain('task.created');
  });

  it('shows task events only to tasks:read and item events only to items:read; neither is 403', async () => {
    const other = await createTenant(t.app);
    await createTask(t.app, other);
    await createItem(t.app, other);
    expect(await waitFor(async () => (await recorded(other.companyId)) >= 2, 10_000)).toBeTruthy();
    const key = async (scopes: string[]) => (await createKey(t.app, other.companyId, other.userId, scopes)).key;

    const tasksOnly = await ext(t.app, await key(['tasks:read']), 'GET', '/events');
    expect(tasksOnly.json<EventEnvelope[]>().map((event) => event.type)).toEqual(['task.created']);
    const itemsKey = await key(['items:read']);
    const itemsOnly = await ext(t.app, itemsKey, 'GET', '/events');
    const itemEvent = itemsOnly.json<EventEnvelope[]>()[0]!;
    expect(itemsOnly.json<EventEnvelope[]>().map((event) => event.type)).toEqual(['item.created']);
    const askedForTasks = await ext(t.app, itemsKey, 'GET', '/events?type=task.created');
    expect(expectProblem(askedForTasks, 403, 'insufficient_scope').required_scope).toBe('tasks:read');

    const neither = await key(['tasks:write', 'items:write']);
    expectProblem(await ext(t.app, neither, 'GET', '/events'), 403, 'insufficient_scope');
    expectProblem(await ext(t.app, neither, 'GET', '/events?type=bogus'), 403, 'insufficient_scope');
    expectProblem(await ext(t.app, neither, 'GET', `/events/${itemEvent.event_id}`), 403, 'insufficient_scope');
    // An event of a kind the key may not read is not found, like another company's.
    expectProblem(
      await ext(t.app, await key(['tasks:read']), 'GET', `/events/${itemEvent.event_id}`),
      404,
      'not_found',
    );
    expectProblem(await ext(t.app, tenant.key, 'GET', `/events/${itemEvent.event_id}`), 404, 'not_found');
    // hooks:manage reads hook events (hook.disabled) and nothing else.
    const hooksKey = await key(['hooks:manage']);
    const hookEvents = await ext(t.app, hooksKey, 'GET', '/events');
    expect(hookEvents.statusCode).toBe(200);
    expect(hookEvents.json()).toEqual([]);
    expectProblem(await ext(t.app, hooksKey, 'GET', '/events?type=task.created'), 403, 'insufficient_scope');
    expectProblem(await ext(t.app, hooksKey, 'GET', `/events/${itemEvent.event_id}`), 404, 'not_found');
  });

  it('answers bad input with 400 naming the parameter', async () => {
    const cases: Array<[string, string]> = [
      ['/events?cursor=not-a-cursor', 'cursor'],
      ['/events?type=task.created,task.exploded', 'type'],
      ['/events?occurred_after=2026-11-02&occurred_before=2026-11-01', 'occurred_after'],
      ['/events?occurred_after=yesterday', 'occurred_after'],
      ['/events?limit=0', 'limit'],
      ['/events?colour=red', 'colour'],
    ];
    for (const [url, path] of cases) {
      const body = expectProblem(await ext(t.app, tenant.key, 'GET', url), 400, 'validation_failed');
      expect(
        body.errors.map((error: { path: string }) => error.path),
        url,
      ).toContain(path);
    }
    const page = await ext(t.app, tenant.key, 'GET', '/events?limit=1');
    const cursor = page.headers['x-next-cursor'] as string;
    expect(cursor).toBeTruthy();
    // A cursor of one filter set is foreign to another.
    const foreign = await ext(
      t.app,
      tenant.key,
      'GET',
      `/events?type=item.created&cursor=${encodeURIComponent(cursor)}`,
    );
    expect(expectProblem(foreign, 400, 'validation_failed').errors[0].path).toBe('cursor');
    expectProblem(await ext(t.app, tenant.key, 'GET', '/events/evt_000000000000000000000000'), 404, 'not_found');
  });

  it('hides events older than the retention at read time, whether or not they were deleted yet', async () => {
    const other = await createTenant(t.app);
    const old = buildEvent(
      'task.created',
      other.companyId,
      { task_id: 'tsk_old' },
      { occurredAt: new Date(Date.now() - 31 * 86_400_000) },
    );
    const recent = buildEvent(
      'task.created',
      other.companyId,
      { task_id: 'tsk_recent' },
      { occurredAt: new Date(Date.now() - 29 * 86_400_000) },
    );
    // Recorded under a longer retention: still stored (as when the TTL monitor has not run yet).
    await new EventsRepository(t.db, 60).record([old, recent]);
    expect(await waitFor(async () => (await recorded(other.companyId)) === 2)).toBe(true);

    const listed = await ext(t.app, other.key, 'GET', '/events');
    expect(listed.json<EventEnvelope[]>().map((event) => event.event_id)).toEqual([recent.event_id]);
    expectProblem(await ext(t.app, other.key, 'GET', `/events/${old.event_id}`), 404, 'not_found');
    expect((await ext(t.app, other.key, 'GET', `/events/${recent.event_id}`)).statusCode).toBe(200);
  });

  it('pages through 10,000 events without skipping or repeating one, ties on occurred_at included', async () => {
    const other = await createTenant(t.app);
    const start = Date.now() - 3_600_000;
    // 10 events share each millisecond, so the id breaks most ties; inserted in bulk, out of order.
    const events = Array.from({ length: 10_000 }, (_, i) =>
      buildEvent(
        i % 3 === 0 ? 'item.updated' : 'task.updated',
        other.companyId,
        { task_id: `tsk_${i}`, item_id: `itm_${i}` },
        {
          occurredAt: new Date(start + Math.floor(i / 10)),
        },
      ),
    );
    const repository = new EventsRepository(t.db, 30);
    for (let i = 0; i < events.length; i += 2_000) await repository.record(events.slice(i, i + 2_000).reverse());
    expect(await waitFor(async () => (await recorded(other.companyId)) === 10_000, 60_000)).toBe(true);

    const seen = await allPages(other.key, '', 200);
    expect(seen).toHaveLength(10_000);
    expect(new Set(seen.map((event) => event.event_id)).size).toBe(10_000);
    const expected = [...events].sort(
      (a, b) => a.occurred_at.localeCompare(b.occurred_at) || a.event_id.localeCompare(b.event_id),
    );
    expect(seen.map((event) => event.event_id)).toEqual(expected.map((event) => event.event_id));
  }, 120_000);
});
