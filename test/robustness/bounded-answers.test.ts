import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENVELOPE_MAX_BYTES } from '../../src/contracts/envelope.js';
import { PAGE_BUDGET_BYTES } from '../../src/shared/pagination.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { admin, createTask, createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from '../hooks/receiver.js';

// Issue 59, item 1: no answer grows without bound (DECISIONS.md section 13.4, docs/pagination.md, docs/events.md).

let t: TestApp;
let workers: { close(): Promise<void> };
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000', HOOK_BACKOFF_MS: '100' }, { publisher: true });
  workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks']);
});
afterAll(async () => {
  await workers?.close();
  await t?.close();
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const textFields = (count: number) => Array.from({ length: count }, (_, i) => ({ name: `t${i}`, type: 'text' }));
/** Values of `count` text fields, each `length` characters of `fill`. */
const texts = (count: number, length: number, fill = 'x') =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`t${i}`, fill.repeat(length)]));

async function createBigItem(tenant: Tenant, metadata: Record<string, unknown>, name = 'Big'): Promise<Json> {
  const response = await ext(t.app, tenant.key, 'POST', '/items', {
    name,
    pipeline_id: tenant.pipelineId,
    stage_id: tenant.stageIds[0],
    metadata,
  });
  expect(response.statusCode, response.body.slice(0, 500)).toBe(201);
  return response.json();
}

/** Follows x-next-cursor from `first` to the last page; every page's rows and body size. */
async function pageThrough(tenant: Tenant, first: string): Promise<Array<{ rows: Json[]; bytes: number }>> {
  const pages: Array<{ rows: Json[]; bytes: number }> = [];
  let url: string | undefined = first;
  while (url) {
    const response = await ext(t.app, tenant.key, 'GET', url);
    expect(response.statusCode, response.body.slice(0, 500)).toBe(200);
    const rows = response.json<Json[]>();
    // The feed's last answer has a cursor too (where to read on): an empty page ends it.
    if (rows.length === 0) break;
    pages.push({ rows, bytes: Buffer.byteLength(response.body) });
    const cursor = response.headers['x-next-cursor'] as string | undefined;
    if (cursor) expect(response.headers.link).toContain(encodeURIComponent(cursor));
    url = cursor ? `${first}&cursor=${encodeURIComponent(cursor)}` : undefined;
    expect(pages.length).toBeLessThan(100);
  }
  return pages;
}

/** The feed's answer at `url` once it holds an event: events are readable moments after their write. */
async function readableEvents(tenant: Tenant, url: string): Promise<Json[]> {
  let events: Json[] = [];
  await waitFor(async () => (events = (await ext(t.app, tenant.key, 'GET', url)).json<Json[]>()).length > 0);
  return events;
}

function expectEachOnce(pages: Array<{ rows: Json[] }>, idKey: string, expected: string[]) {
  const seen = pages.flatMap((page) => page.rows.map((row) => row[idKey] as string));
  expect(new Set(seen).size).toBe(seen.length);
  expect(seen).toEqual(expected);
}

describe('a page ends early at its byte budget, and paging stays exact', () => {
  it('items of 200 KB each: limit=200 answers about 1 MiB a page with a cursor, and every item comes once, in order', async () => {
    const tenant = await createTenant(t.app, { fields: textFields(20) });
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await createBigItem(tenant, texts(20, 10_000), `Big ${i}`)).item_id);
    for (const sort of ['created_at', '-created_at']) {
      const pages = await pageThrough(tenant, `/items?limit=200&sort=${sort}`);
      expect(pages.length).toBeGreaterThan(2);
      for (const page of pages) {
        expect(page.rows.length).toBeGreaterThan(0);
        expect(page.bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
      }
      expectEachOnce(pages, 'item_id', sort === 'created_at' ? ids : [...ids].reverse());
    }
  });

  it('a single item larger than the budget still comes, one a page', async () => {
    const tenant = await createTenant(t.app, { fields: textFields(60) });
    const first = await createBigItem(tenant, texts(60, 10_000, 'a'));
    const update = await ext(t.app, tenant.key, 'PATCH', `/items/${first.item_id}`, {
      metadata: texts(60, 10_000, 'b'),
    });
    expect(update.statusCode).toBe(200);
    const second = await createBigItem(tenant, texts(60, 10_000, 'c'));
    // 600 KB each: never two on one page.
    const pages = await pageThrough(tenant, '/items?limit=50');
    expect(pages.map((page) => page.rows.length)).toEqual([1, 1]);
    expectEachOnce(pages, 'item_id', [first.item_id, second.item_id]);
  });

  it('tasks with long description and notes: pages end at the budget and every task comes once', async () => {
    const tenant = await createTenant(t.app);
    const ids: string[] = [];
    for (let i = 0; i < 70; i++) {
      const task = await createTask(t.app, tenant, {
        title: `Task ${i}`,
        due_at: new Date(Date.UTC(2027, 0, 1, 0, i)).toISOString(),
        description: 'd'.repeat(10_000),
        notes: 'n'.repeat(10_000),
      });
      ids.push(task.task_id);
    }
    const pages = await pageThrough(tenant, '/tasks?limit=200');
    expect(pages.length).toBe(2);
    for (const page of pages) expect(page.bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
    expectEachOnce(pages, 'task_id', ids);
  });

  it('pipelines with many long options: pages end at the budget and every pipeline comes once', async () => {
    const tenant = await createTenant(t.app);
    const ids = [tenant.pipelineId];
    for (let p = 0; p < 4; p++) {
      const fields = Array.from({ length: 10 }, (_, f) => ({
        name: `choice${f}`,
        type: 'multi_select',
        options: Array.from({ length: 200 }, (_, o) => `${p}-${f}-${o}-`.padEnd(200, 'o')),
      }));
      const pipeline = await admin(
        t.app,
        'POST',
        `/companies/${tenant.companyId}/pipelines`,
        { name: `Wide ${p}`, stages: [{ name: 'Lead' }], fields },
        201,
      );
      ids.push(pipeline.json().pipeline_id);
    }
    const pages = await pageThrough(tenant, '/pipelines?limit=200');
    expect(pages.length).toBeGreaterThan(1);
    for (const page of pages) expect(page.bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
    expectEachOnce(pages, 'pipeline_id', ids);
  });

  it('the events feed: envelopes of 240 KB each, pages of about 1 MiB, every event once', async () => {
    const tenant = await createTenant(t.app, { fields: textFields(60) });
    const items: string[] = [];
    // 60 values of 4,000 characters: each under the value cap, so item.created carries them all.
    for (let i = 0; i < 7; i++) items.push((await createBigItem(tenant, texts(60, 4_000))).item_id);
    // Readable once the web process moved them from the outbox (moments after each write).
    for (const item of items) await readableEvents(tenant, `/events?resource_id=${item}`);
    const pages = await pageThrough(tenant, '/events?type=item.created&limit=200');
    expect(pages.length).toBeGreaterThan(1);
    for (const page of pages) expect(page.bytes).toBeLessThanOrEqual(PAGE_BUDGET_BYTES);
    const events = pages.flatMap((page) => page.rows);
    expect(events.map((event) => event.data.item_id)).toEqual(items);
    expect(events[0]!.data.t0).toBe('x'.repeat(4_000));
    expectEachOnce(
      pages,
      'event_id',
      events.map((event) => event.event_id as string),
    );
  });
});

describe('an envelope carries at most 256 KiB: values over the cap are markers', () => {
  it('item.updated of 10,000-character values: markers in data and changes, in the feed and in the webhook body', async () => {
    const inbox = await Receiver.start();
    try {
      const tenant = await createTenant(t.app, { fields: textFields(3) });
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'item.updated' });
      const item = await createBigItem(tenant, { t0: 'a'.repeat(10_000), t1: 'short' });
      const updated = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, {
        metadata: { t0: 'é'.repeat(10_000), t1: 'still short', t2: 'new' },
      });
      // The answer itself is the whole item: only events carry markers.
      expect(updated.json().t0).toBe('é'.repeat(10_000));

      const feedUrl = `/events?type=item.updated&resource_id=${item.item_id}`;
      const [event] = await readableEvents(tenant, feedUrl);
      const expected = {
        data: {
          item_id: item.item_id,
          name: 'Big',
          version: 2,
          t0: { truncated: true, bytes: 20_002 },
          t1: 'still short',
        },
        changes: {
          t0: { from: { truncated: true, bytes: 10_002 }, to: { truncated: true, bytes: 20_002 } },
          t1: { from: 'short', to: 'still short' },
          t2: { from: null, to: 'new' },
        },
      };
      expect(event).toMatchObject(expected);
      const byId = await ext(t.app, tenant.key, 'GET', `/events/${event!.event_id}`);
      expect(byId.json()).toEqual(event);

      await waitFor(() => inbox.requests.length >= 1);
      const delivered = JSON.parse(inbox.requests[0]!.body);
      expect(delivered).toMatchObject({ event_id: event!.event_id, ...expected });
      expect(inbox.violations).toEqual([]);
    } finally {
      await inbox.close();
    }
  });

  it('a task.updated of a 10,000-character description carries the marker, typed by the webhook schema', async () => {
    const inbox = await Receiver.start();
    try {
      const tenant = await createTenant(t.app);
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.updated' });
      const task = await createTask(t.app, tenant, { description: 'd'.repeat(10_000) });
      await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { notes: 'n'.repeat(5_000) });
      await waitFor(() => inbox.requests.length >= 1);
      const delivered = JSON.parse(inbox.requests[0]!.body);
      expect(delivered.data).toMatchObject({
        task_id: task.task_id,
        description: { truncated: true, bytes: 10_002 },
        notes: { truncated: true, bytes: 5_002 },
      });
      expect(delivered.changes).toEqual({ notes: { from: null, to: { truncated: true, bytes: 5_002 } } });
      expect(inbox.violations).toEqual([]);
    } finally {
      await inbox.close();
    }
  });

  it('100 fields of 3,000 characters (each under the value cap): the envelope stays within 256 KiB', async () => {
    const tenant = await createTenant(t.app, { fields: textFields(100) });
    const item = await createBigItem(tenant, texts(100, 3_000));
    const [event] = await readableEvents(tenant, `/events?resource_id=${item.item_id}`);
    expect(Buffer.byteLength(JSON.stringify(event))).toBeLessThanOrEqual(ENVELOPE_MAX_BYTES);
    const values = Object.entries(event!.data as Json).filter(([key]) => /^t\d+$/.test(key));
    const markers = values.filter(([, value]) => typeof value === 'object');
    expect(markers.length).toBeGreaterThan(0);
    expect(markers.length).toBeLessThan(100);
    for (const [, value] of markers) expect(value).toEqual({ truncated: true, bytes: 3_002 });
  });
});

describe('a batch answer is bounded', () => {
  it('results carry their item while the items fit in 1 MiB; later ones carry item_id, version and truncated', async () => {
    const tenant = await createTenant(t.app, { fields: textFields(20) });
    const items: Json[] = [];
    for (let i = 0; i < 8; i++) items.push(await createBigItem(tenant, texts(20, 10_000)));
    const response = await ext(t.app, tenant.key, 'POST', '/items/batch', {
      operations: [
        ...items.map((item) => ({ op: 'update', item_id: item.item_id, name: `Renamed ${item.item_id}` })),
        { op: 'update', item_id: 'itm_missing', name: 'x' },
      ],
    });
    expect(response.statusCode).toBe(200);
    expect(Buffer.byteLength(response.body)).toBeLessThanOrEqual(PAGE_BUDGET_BYTES + 10_000);
    const { results } = response.json<{ results: Json[] }>();
    expect(results).toHaveLength(9);
    const full = results.filter((result) => result.item);
    expect(full.length).toBeGreaterThan(0);
    expect(full.length).toBeLessThan(8);
    results.slice(0, 8).forEach((result, index) => {
      expect(result.status).toBe(200);
      if (index < full.length) {
        expect(result.item).toMatchObject({ item_id: items[index]!.item_id, version: 2, t0: 'x'.repeat(10_000) });
        expect(result.truncated).toBeUndefined();
      } else expect(result).toEqual({ status: 200, item_id: items[index]!.item_id, version: 2, truncated: true });
    });
    expect(results[8]).toMatchObject({ status: 404, error: { code: 'not_found' } });
    // Every operation was applied, truncated or not.
    const last = await ext(t.app, tenant.key, 'GET', `/items/${items[7]!.item_id}`);
    expect(last.json()).toMatchObject({ name: `Renamed ${items[7]!.item_id}`, version: 2 });
  });
});

describe('the OpenAPI document says the rules', () => {
  it('declares TruncatedValue in event data, the truncated batch result and the page budget', async () => {
    const document = (await t.app.inject({ method: 'GET', url: '/v1/ext/openapi.json' })).json<Json>();
    const schemas = document.components.schemas;
    expect(schemas.TruncatedValue).toMatchObject({
      type: 'object',
      required: ['truncated', 'bytes'],
      properties: { truncated: { const: true } },
    });
    const refsTruncated = (schema: Json) => JSON.stringify(schema).includes('#/components/schemas/TruncatedValue');
    expect(refsTruncated(schemas.EventItem.additionalProperties)).toBe(true);
    expect(refsTruncated(schemas.EventTask.properties.description)).toBe(true);
    expect(Object.keys(schemas.BatchResult.properties)).toEqual(
      expect.arrayContaining(['item', 'truncated', 'item_id', 'version']),
    );
    expect(document.info.description).toContain('about 1 MiB');
    const listHeaders = document.paths['/v1/ext/items'].get.responses['200'].headers;
    expect(listHeaders['x-next-cursor'].description).toContain('about 1 MiB');
  });
});
