import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createKey, createTask, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
let baseUrl: string;

type Item = Record<string, unknown> & { item_id: string; version: number };
type FeedEvent = { type: string; sequence: number; data: Item };

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' }, { publisher: true });
  tenant = await createTenant(t.app);
  other = await createTenant(t.app);
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => t?.close());

/** Creates `count` items of the tenant, 100 per batch request. */
async function seedItems(who: Tenant, count: number, prefix: string): Promise<Item[]> {
  const created: Item[] = [];
  for (let start = 0; start < count; start += 100) {
    const operations = Array.from({ length: Math.min(100, count - start) }, (_, index) => ({
      op: 'create',
      name: `${prefix} ${start + index}`,
      pipeline_id: who.pipelineId,
      stage_id: who.stageIds[0],
      metadata: { deal_value: start + index },
    }));
    const response = await ext(t.app, who.key, 'POST', '/items/batch', { operations });
    expect(response.statusCode, response.body).toBe(200);
    created.push(...response.json<{ results: Array<{ item: Item }> }>().results.map((result) => result.item));
  }
  return created;
}

const parseLines = (text: string): Item[] => {
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line) as Item);
};

const readable = async (who: Tenant) =>
  ((await t.db.collection('event_sequences').findOne({ _id: who.companyId as never }))?.readable as number) ?? 0;

/** Every live item, by paging the list. */
async function freshRead(who: Tenant): Promise<Map<string, Item>> {
  const items = new Map<string, Item>();
  let cursor: string | undefined;
  do {
    const response = await ext(
      t.app,
      who.key,
      'GET',
      `/items?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    expect(response.statusCode, response.body).toBe(200);
    for (const item of response.json<Item[]>()) items.set(item.item_id, item);
    cursor = response.headers['x-next-cursor'] as string | undefined;
  } while (cursor);
  return items;
}

describe('GET /v1/ext/export/items', () => {
  it('streams every live item as NDJSON in the shape GET answers, only the caller company', async () => {
    const mine = await seedItems(tenant, 30, 'Shape');
    await seedItems(other, 5, 'Foreign');
    const gone = mine[3]!;
    expect((await ext(t.app, tenant.key, 'DELETE', `/items/${gone.item_id}`)).statusCode).toBe(204);
    const response = await ext(t.app, tenant.key, 'GET', '/export/items');
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/x-ndjson/);
    expect(response.headers['x-next-cursor']).toEqual(expect.any(String));
    const lines = parseLines(response.body);
    const ids = lines.map((line) => line.item_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).not.toContain(gone.item_id);
    const fresh = await freshRead(tenant);
    expect(new Map(lines.map((line) => [line.item_id, line]))).toEqual(fresh);
    const one = await ext(t.app, tenant.key, 'GET', `/items/${mine[5]!.item_id}`);
    expect(lines.find((line) => line.item_id === mine[5]!.item_id)).toEqual(one.json());
    expect(JSON.stringify(lines.find((line) => line.item_id === mine[5]!.item_id))).toBe(one.body);
    // The cursor is a position of this key's feed.
    const feed = await ext(
      t.app,
      tenant.key,
      'GET',
      `/events?cursor=${encodeURIComponent(response.headers['x-next-cursor'] as string)}`,
    );
    expect(feed.statusCode, feed.body).toBe(200);
  });

  it('export + the feed from x-next-cursor equals a fresh read, with writes during the export', async () => {
    const company = await createTenant(t.app);
    const seeded = await seedItems(company, 1_500, 'Bulk');
    // Every event of the seeding readable first: the position then sits right before the writes below.
    await waitFor(async () => (await readable(company)) >= 1_500, 20_000);
    const response = await fetch(`${baseUrl}/v1/ext/export/items`, { headers: { 'x-api-key': company.key } });
    expect(response.status).toBe(200);
    const position = response.headers.get('x-next-cursor')!;
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const first = await reader.read();
    text += decoder.decode(first.value, { stream: true });
    // The export has started (and is held back by this client): now write, before and after its read position.
    const early = seeded.slice(0, 20);
    const late = seeded.slice(-20);
    for (const item of [...early, ...late])
      expect(
        (await ext(t.app, company.key, 'PATCH', `/items/${item.item_id}`, { name: `${String(item.name)} changed` }))
          .statusCode,
      ).toBe(200);
    for (const item of [seeded[1]!, seeded.at(-2)!])
      expect((await ext(t.app, company.key, 'DELETE', `/items/${item.item_id}`)).statusCode).toBe(204);
    const added = await seedItems(company, 10, 'Added during export');
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const copy = new Map(parseLines(text).map((item) => [item.item_id, item]));
    expect(copy.size).toBeGreaterThanOrEqual(1_500 - 2);

    // Follow the feed from the export's position until the last write's event has been applied.
    const lastAdded = added.at(-1)!.item_id;
    let cursor = position;
    let sawLast = false;
    await waitFor(async () => {
      for (;;) {
        const page = await ext(t.app, company.key, 'GET', `/events?limit=200&cursor=${encodeURIComponent(cursor)}`);
        expect(page.statusCode, page.body).toBe(200);
        cursor = page.headers['x-next-cursor'] as string;
        const events = page.json<FeedEvent[]>();
        for (const event of events) {
          if (!event.type.startsWith('item.')) continue;
          const current = copy.get(event.data.item_id);
          if (event.type === 'item.deleted') copy.delete(event.data.item_id);
          else if (!current || current.version < event.data.version) copy.set(event.data.item_id, event.data);
          if (event.data.item_id === lastAdded) sawLast = true;
        }
        if (events.length === 0) return sawLast;
      }
    }, 20_000);
    const fresh = await freshRead(company);
    expect(fresh.size).toBe(1_500 - 2 + 10);
    expect(copy).toEqual(fresh);
  });

  it('closes its cursor when the client goes away', async () => {
    const company = await createTenant(t.app);
    await seedItems(company, 1_200, 'Dropped');
    const aborted = new AbortController();
    const response = await fetch(`${baseUrl}/v1/ext/export/items`, {
      headers: { 'x-api-key': company.key },
      signal: aborted.signal,
    });
    const reader = response.body!.getReader();
    await reader.read();
    expect(t.app.services.exports.active).toBe(1);
    aborted.abort();
    await waitFor(() => t.app.services.exports.active === 0, 5_000);
  });

  it('needs items:read (403 otherwise) and counts once for the rate limit', async () => {
    const tasksOnly = await createKey(t.app, tenant.companyId, tenant.userId, ['tasks:read']);
    expectProblem(await ext(t.app, tasksOnly.key, 'GET', '/export/items'), 403, 'insufficient_scope');
    const first = await ext(t.app, tenant.key, 'GET', '/export/items');
    const second = await ext(t.app, tenant.key, 'GET', '/export/items');
    expect(Number(first.headers['ratelimit-remaining']) - Number(second.headers['ratelimit-remaining'])).toBe(1);
  });
});

describe('GET /v1/ext/export/tasks', () => {
  it('streams every live task as GET answers it; needs tasks:read', async () => {
    const company = await createTenant(t.app);
    const tasks = [];
    for (let index = 0; index < 5; index++) tasks.push(await createTask(t.app, company, { title: `Export ${index}` }));
    await createTask(t.app, other, { title: 'Foreign task' });
    expect((await ext(t.app, company.key, 'DELETE', `/tasks/${tasks[0].task_id}`)).statusCode).toBe(204);
    const response = await ext(t.app, company.key, 'GET', '/export/tasks');
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/x-ndjson/);
    const lines = parseLines(response.body);
    expect(lines.map((line) => line.task_id)).toEqual(tasks.slice(1).map((task) => task.task_id));
    expect(lines[0]).toEqual((await ext(t.app, company.key, 'GET', `/tasks/${tasks[1].task_id}`)).json());
    const itemsOnly = await createKey(t.app, company.companyId, company.userId, ['items:read']);
    expectProblem(await ext(t.app, itemsOnly.key, 'GET', '/export/tasks'), 403, 'insufficient_scope');
  });
});
