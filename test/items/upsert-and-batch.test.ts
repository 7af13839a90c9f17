import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { feedOf } from '../helpers/events.js';
import { createItem, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' }, { publisher: true });
  tenant = await createTenant(t.app);
  other = await createTenant(t.app);
});
afterAll(async () => t?.close());

const body = (extra: Record<string, unknown> = {}, who = tenant) => ({
  name: 'Acme renewal',
  pipeline_id: who.pipelineId,
  stage_id: who.stageIds[0],
  ...extra,
});
const put = (externalId: string, payload: unknown, headers: Record<string, string> = {}, who = tenant) =>
  ext(t.app, who.key, 'PUT', `/items/by-external-id/${encodeURIComponent(externalId)}`, payload, headers);
const batch = (operations: unknown, headers: Record<string, string> = {}) =>
  ext(t.app, tenant.key, 'POST', '/items/batch', { operations }, headers);
/** An item's events in the feed, once `count` of them are readable. */
const events = (itemId: string, count: number): Promise<EventEnvelope[]> => feedOf(t.app, tenant.key, itemId, count);
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

describe('external_id on items', () => {
  it('is set on create, shown on every read (null when none) and filters lists', async () => {
    const externalId = unique('crm');
    const item = await createItem(t.app, tenant, { external_id: externalId });
    expect(item.external_id).toBe(externalId);
    expect((await createItem(t.app, tenant)).external_id).toBeNull();
    const listed = await ext(t.app, tenant.key, 'GET', `/items?external_id=${externalId}`);
    expect(listed.json().map((row: { item_id: string }) => row.item_id)).toEqual([item.item_id]);
    expect((await ext(t.app, other.key, 'GET', `/items?external_id=${externalId}`)).json()).toEqual([]);
  });

  it('is unique per company: 409 external_id_taken on create and on update, free in another company', async () => {
    const externalId = unique('crm');
    await createItem(t.app, tenant, { external_id: externalId });
    const second = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', body({ external_id: externalId })),
      409,
      'external_id_taken',
    );
    expect(second.errors).toEqual([{ path: 'external_id', message: expect.any(String) }]);
    const another = await createItem(t.app, tenant);
    expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${another.item_id}`, { external_id: externalId }),
      409,
      'external_id_taken',
    );
    expect((await ext(t.app, tenant.key, 'GET', `/items/${another.item_id}`)).json().version).toBe(1);
    await createItem(t.app, other, { external_id: externalId });
  });

  it('refuses an empty, over-long or control-character external_id with 400', async () => {
    for (const bad of ['', 'x'.repeat(256), 'a\u0001b']) {
      const response = await ext(t.app, tenant.key, 'POST', '/items', body({ external_id: bad }));
      expect(expectProblem(response, 400, 'validation_failed').errors[0].path).toBe('external_id');
    }
    expectProblem(await put('x'.repeat(256), body()), 400, 'validation_failed');
    expect((await put('x'.repeat(255), body())).statusCode).toBe(201);
  });

  it('is released by DELETE: the same external_id then names a new item', async () => {
    const externalId = unique('crm');
    const first = (await put(externalId, body())).json();
    expect((await ext(t.app, tenant.key, 'DELETE', `/items/${first.item_id}`)).statusCode).toBe(204);
    const second = await put(externalId, body());
    expect(second.statusCode).toBe(201);
    expect(second.json().item_id).not.toBe(first.item_id);
  });
});

describe('PUT /v1/ext/items/by-external-id/{external_id}', () => {
  it('creates (201) and then updates (200) the same item, with item.created then item.updated', async () => {
    const externalId = unique('crm');
    const created = await put(externalId, body({ metadata: { deal_value: 10 } }));
    expect(created.statusCode, created.body).toBe(201);
    expect(created.headers.etag).toBe('"1"');
    expect(created.json()).toMatchObject({ external_id: externalId, version: 1, deal_value: 10 });

    const updated = await put(externalId, body({ name: 'Acme renewal 2027', metadata: { industry: 'retail' } }));
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json()).toMatchObject({
      item_id: created.json().item_id,
      name: 'Acme renewal 2027',
      version: 2,
      deal_value: 10,
      industry: 'retail',
    });
    const unchanged = await put(externalId, body({ name: 'Acme renewal 2027' }));
    expect(unchanged.statusCode).toBe(200);
    expect(unchanged.json().version).toBe(2);
    // A change after the no-op: once its event is readable, any event the no-op recorded would be too.
    expect((await put(externalId, body({ name: 'Acme renewal 2028' }))).statusCode).toBe(200);
    expect((await events(created.json().item_id, 3)).map((event) => [event.type, event.changes?.name?.to])).toEqual([
      ['item.created', undefined],
      ['item.updated', 'Acme renewal 2027'],
      ['item.updated', 'Acme renewal 2028'],
    ]);
  });

  it('honours version and If-Match on update: 409 / 412 when stale, nothing changes', async () => {
    const externalId = unique('crm');
    await put(externalId, body());
    await put(externalId, body({ name: 'v2' }));
    expect(
      expectProblem(await put(externalId, body({ name: 'v3', version: 1 })), 409, 'version_conflict').current_version,
    ).toBe(2);
    expectProblem(await put(externalId, body({ name: 'v3' }), { 'if-match': '"1"' }), 412, 'precondition_failed');
    expectProblem(await put(externalId, body({ name: 'v3' }), { 'if-match': 'W/"2"' }), 412, 'precondition_failed');
    const fresh = await put(externalId, body({ name: 'v3' }), { 'if-match': '"2"' });
    expect(fresh.statusCode).toBe(200);
    expect(fresh.json()).toMatchObject({ name: 'v3', version: 3 });
    expectProblem(await put(unique('none'), body(), { 'if-match': '"1"' }), 412, 'precondition_failed');
  });

  it('validates the body like a create and refuses moving an existing item to another pipeline', async () => {
    const externalId = unique('crm');
    const missing = expectProblem(await put(externalId, { name: 'x' }), 400, 'validation_failed');
    expect(missing.errors.map((error: { path: string }) => error.path).sort()).toEqual(['pipeline_id', 'stage_id']);
    expectProblem(await put(externalId, body({ external_id: 'other' })), 400, 'validation_failed');
    await put(externalId, body());
    const moved = expectProblem(
      await put(externalId, body({ pipeline_id: other.pipelineId })),
      400,
      'validation_failed',
    );
    expect(moved.errors[0].path).toBe('pipeline_id');
  });

  it('never creates two items for one external_id under concurrent upserts', async () => {
    const externalId = unique('race');
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, index) => put(externalId, body({ name: `Racer ${index}` }))),
    );
    expect(responses.map((response) => response.statusCode).sort()).toEqual([
      200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 201,
    ]);
    expect(new Set(responses.map((response) => response.json().item_id)).size).toBe(1);
    expect(
      await t.db.collection('items').countDocuments({ company_id: tenant.companyId, external_id: externalId }),
    ).toBe(1);
  });
});

describe('POST /v1/ext/items/batch', () => {
  it('runs create, update and upsert in order with one result each, and each records its own event', async () => {
    const existing = await createItem(t.app, tenant);
    const externalId = unique('batch');
    const response = await batch([
      { op: 'create', ...body({ name: 'Batch one' }) },
      { op: 'update', item_id: existing.item_id, name: 'Batch renamed' },
      { op: 'upsert', external_id: externalId, ...body({ name: 'Batch upsert' }) },
      { op: 'upsert', external_id: externalId, ...body({ name: 'Batch upsert again' }) },
    ]);
    expect(response.statusCode, response.body).toBe(200);
    const { results } = response.json();
    expect(results.map((result: { status: number }) => result.status)).toEqual([201, 200, 201, 200]);
    expect(results[0].item).toMatchObject({ name: 'Batch one', version: 1 });
    expect(results[1].item).toMatchObject({ item_id: existing.item_id, name: 'Batch renamed', version: 2 });
    // A duplicate external_id inside one batch: the second is an update of the first.
    expect(results[3].item).toMatchObject({ item_id: results[2].item.item_id, name: 'Batch upsert again', version: 2 });
    expect((await events(results[0].item.item_id, 1)).map((event) => event.type)).toEqual(['item.created']);
    expect((await events(existing.item_id, 2)).map((event) => event.type)).toEqual(['item.created', 'item.updated']);
    expect((await events(results[2].item.item_id, 2)).map((event) => event.type)).toEqual([
      'item.created',
      'item.updated',
    ]);
  });

  it('answers an invalid or failing operation in its own result; the others proceed', async () => {
    const foreign = await createItem(t.app, other);
    const taken = unique('taken');
    await createItem(t.app, tenant, { external_id: taken });
    const response = await batch([
      { op: 'create', ...body({ name: 'Fine' }) },
      { op: 'create', name: 'No stage', pipeline_id: tenant.pipelineId },
      { op: 'update', item_id: foreign.item_id, name: 'Hijack' },
      { op: 'create', ...body({ name: 'Taken', external_id: taken }) },
      { op: 'create', ...body({ name: 'Bad field', metadata: { deal_value: 'lots' } }) },
      { op: 'update', item_id: 'itm_000000000000000000000000', name: 'x' },
      { op: 'create', ...body({ name: 'Also fine' }) },
    ]);
    expect(response.statusCode, response.body).toBe(200);
    const { results } = response.json();
    expect(results.map((result: { status: number }) => result.status)).toEqual([201, 400, 404, 409, 400, 404, 201]);
    expect(results[1].error).toMatchObject({ status: 400, code: 'validation_failed', errors: [{ path: 'stage_id' }] });
    expect(results[2].error).toMatchObject({ status: 404, code: 'not_found' });
    expect(results[3].error).toMatchObject({ status: 409, code: 'external_id_taken' });
    expect(results[4].error.errors[0].path).toBe('metadata.deal_value');
    expect(results[6].item.short_id).not.toBe(results[0].item.short_id);
    expect((await ext(t.app, other.key, 'GET', `/items/${foreign.item_id}`)).json().name).toBe(foreign.name);
  });

  it('refuses the whole request for 0 or 101 operations and an unknown op, naming the path', async () => {
    const count = () => t.db.collection('items').countDocuments({ company_id: tenant.companyId });
    const before = await count();
    expect(expectProblem(await batch([]), 400, 'validation_failed').errors[0].path).toBe('operations');
    const many = Array.from({ length: 101 }, () => ({ op: 'create', ...body() }));
    expect(expectProblem(await batch(many), 400, 'validation_failed').errors[0].path).toBe('operations');
    const unknown = expectProblem(
      await batch([{ op: 'create', ...body() }, { op: 'delete' }]),
      400,
      'validation_failed',
    );
    expect(unknown.errors[0].path).toBe('operations.1.op');
    expect(await count()).toBe(before);
  });

  it('creates 100 items with distinct short ids, counts once for the rate limit and replays with its Idempotency-Key', async () => {
    const operations = Array.from({ length: 100 }, (_, index) => ({
      op: 'create',
      ...body({ name: `Bulk ${index}` }),
    }));
    const key = `batch-${unique('k')}`;
    const first = await batch(operations, { 'idempotency-key': key });
    expect(first.statusCode, first.body).toBe(200);
    const results = first.json().results as Array<{ status: number; item: { short_id: string; name: string } }>;
    expect(results.every((result) => result.status === 201)).toBe(true);
    expect(results.map((result) => result.item.name)).toEqual(operations.map((operation) => operation.name));
    expect(new Set(results.map((result) => result.item.short_id)).size).toBe(100);

    const remainingBefore = Number(first.headers['ratelimit-remaining']);
    const replay = await batch(operations, { 'idempotency-key': key });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(first.json());
    expect(Number(replay.headers['ratelimit-remaining'])).toBe(remainingBefore - 1);
    expect(
      await t.db.collection('items').countDocuments({ company_id: tenant.companyId, name: { $regex: '^Bulk ' } }),
    ).toBe(100);
  });
});
