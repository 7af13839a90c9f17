import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { must } from '../../src/shared/must.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createItem, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
});
afterAll(async () => t?.close());

interface Task {
  task_id: string;
  due_at: string;
  created_at: string;
}

const SORTS = ['due_at', '-due_at', 'created_at', '-created_at'] as const;
const HOUR = 3_600_000;
const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();

describe('paging through tasks', () => {
  let tenant: Tenant;
  let all: string[];

  beforeAll(async () => {
    tenant = await createTenant(t.app);
    all = [];
    // 150 tasks over 40 distinct due times, so many share a due_at and the id must break the tie.
    for (let batch = 0; batch < 3; batch++) {
      const created = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          createTask(t.app, tenant, {
            title: `task ${batch}-${i}`,
            due_at: `2026-11-${String(10 + ((batch * 50 + i) % 20)).padStart(2, '0')}T0${i % 2}:00:00Z`,
          }),
        ),
      );
      all.push(...created.map((task) => task.task_id));
    }
  }, 60_000);

  it.each(SORTS)(
    'returns 150 tasks with limit=37 sorted by %s, each exactly once and in order',
    async (sort) => {
      const field = sort.replace('-', '') as 'due_at' | 'created_at';
      const direction = sort.startsWith('-') ? -1 : 1;
      const seen: Task[] = [];
      let url: string | undefined = `/tasks?limit=37&sort=${sort}`;
      while (url) {
        const response = await ext(t.app, tenant.key, 'GET', url);
        expect(response.statusCode, response.body).toBe(200);
        const page: Task[] = response.json();
        expect(page.length).toBeLessThanOrEqual(37);
        seen.push(...page);
        const next = response.headers['x-next-cursor'] as string | undefined;
        if (!next) break;
        const link = response.headers.link as string;
        expect(link).toMatch(/^<\/v1\/ext\/tasks\?.*cursor=.*>; rel="next"$/);
        url = link.slice(link.indexOf('<') + 1 + '/v1/ext'.length, link.indexOf('>'));
      }
      expect(seen).toHaveLength(150);
      expect(new Set(seen.map((task) => task.task_id))).toEqual(new Set(all));
      for (let i = 1; i < seen.length; i++) {
        const [a, b] = [must(seen[i - 1], 'the previous row'), must(seen[i], 'this row')];
        const cmp = a[field] === b[field] ? (a.task_id < b.task_id ? 1 : -1) : a[field] < b[field] ? 1 : -1;
        expect(cmp, JSON.stringify([i, a, b])).toBe(direction);
      }
    },
    30_000,
  );

  it('rejects bad limits, values, unknown parameters and tampered or foreign cursors with 400', async () => {
    const bad = [
      'limit=0',
      'limit=201',
      'limit=x',
      'sort=title',
      'is_completed=yes',
      'overdue=1',
      'priority=critical',
      'task_type=lunch',
      'due_before=tomorrow',
      'due_after=2026-13-01T00:00:00Z',
      'updated_after=x',
      'colour=red',
      'cursor=abc',
    ];
    for (const query of bad)
      expectProblem(await ext(t.app, tenant.key, 'GET', `/tasks?${query}`), 400, 'validation_failed');
    const cursor = (await ext(t.app, tenant.key, 'GET', '/tasks?limit=2')).headers['x-next-cursor'] as string;
    expect(cursor).toBeTruthy();
    expectProblem(
      await ext(t.app, tenant.key, 'GET', `/tasks?limit=2&sort=-due_at&cursor=${cursor}`),
      400,
      'validation_failed',
    );
    expectProblem(
      await ext(t.app, tenant.key, 'GET', `/tasks?limit=2&priority=low&cursor=${cursor}`),
      400,
      'validation_failed',
    );
    const other = await createTenant(t.app);
    expectProblem(await ext(t.app, other.key, 'GET', `/tasks?limit=2&cursor=${cursor}`), 400, 'validation_failed');
    expect((await ext(t.app, tenant.key, 'GET', `/tasks?limit=2&cursor=${cursor}`)).statusCode).toBe(200);
  });
});

describe('filtering tasks', () => {
  let own: Tenant;
  let tasks: Record<'pastOpen' | 'pastDone' | 'futureOpen' | 'linked' | 'colleague', Task>;
  let itemId: string;
  let colleagueId: string;
  const ids = async (query: string) =>
    (await ext(t.app, own.key, 'GET', `/tasks?${query}`)).json().map((task: Task) => task.task_id);

  beforeAll(async () => {
    own = await createTenant(t.app);
    itemId = (await createItem(t.app, own)).item_id;
    colleagueId = (
      await admin(t.app, 'POST', `/companies/${own.companyId}/users`, { name: 'Cy', email: 'cy@example.com' }, 201)
    ).json().user_id;
    tasks = {
      pastOpen: await createTask(t.app, own, { due_at: at(-2 * HOUR), priority: 'high', task_type: 'call' }),
      pastDone: await createTask(t.app, own, { due_at: at(-HOUR), is_completed: true }),
      futureOpen: await createTask(t.app, own, { due_at: at(HOUR), priority: 'low' }),
      linked: await createTask(t.app, own, { due_at: at(2 * HOUR), item_id: itemId, task_type: 'email' }),
      colleague: await createTask(t.app, own, { due_at: at(3 * HOUR), assigned_to: colleagueId }),
    };
  });

  it('filters by completion, assignee, item, type and priority', async () => {
    const { pastOpen, pastDone, futureOpen, linked, colleague } = tasks;
    expect(await ids('is_completed=true')).toEqual([pastDone.task_id]);
    expect(await ids('is_completed=false')).toEqual([
      pastOpen.task_id,
      futureOpen.task_id,
      linked.task_id,
      colleague.task_id,
    ]);
    expect(await ids(`assigned_to=${colleagueId}`)).toEqual([colleague.task_id]);
    expect(await ids(`item_id=${itemId}`)).toEqual([linked.task_id]);
    expect(await ids('task_type=call')).toEqual([pastOpen.task_id]);
    expect(await ids('task_type=email')).toEqual([linked.task_id]);
    expect(await ids('priority=low')).toEqual([futureOpen.task_id]);
    expect(await ids('priority=none&task_type=to_do')).toEqual([pastDone.task_id, colleague.task_id]);
  });

  it('filters by due time window and overdue status', async () => {
    const { pastOpen, pastDone, futureOpen, linked, colleague } = tasks;
    const q = (iso: string) => encodeURIComponent(iso);
    expect(await ids(`due_before=${q(futureOpen.due_at)}`)).toEqual([pastOpen.task_id, pastDone.task_id]);
    expect(await ids(`due_after=${q(futureOpen.due_at)}`)).toEqual([linked.task_id, colleague.task_id]);
    expect(await ids(`due_after=${q(pastOpen.due_at)}&due_before=${q(linked.due_at)}`)).toEqual([
      pastDone.task_id,
      futureOpen.task_id,
    ]);
    expect(await ids('overdue=true')).toEqual([pastOpen.task_id]);
    expect(await ids('overdue=false')).toEqual([
      pastDone.task_id,
      futureOpen.task_id,
      linked.task_id,
      colleague.task_id,
    ]);
    expect(await ids('overdue=true&sort=-due_at&is_completed=false')).toEqual([pastOpen.task_id]);
  });

  it('filters by updated_after and sorts by creation', async () => {
    const { pastOpen, pastDone, futureOpen, linked, colleague } = tasks;
    const since = colleague.created_at;
    await new Promise((resolve) => setTimeout(resolve, 5));
    await ext(t.app, own.key, 'PATCH', `/tasks/${futureOpen.task_id}`, { notes: 'moved' });
    expect(await ids(`updated_after=${encodeURIComponent(since)}`)).toEqual([futureOpen.task_id]);
    expect(await ids('sort=-created_at')).toEqual(
      [colleague, linked, futureOpen, pastDone, pastOpen].map((task) => task.task_id),
    );
    expect(await ids('sort=-due_at&limit=2')).toEqual([colleague.task_id, linked.task_id]);
  });
});
