import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { must } from '../../src/shared/must.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { feedOf } from '../helpers/events.js';
import { createItem, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
let tenant: Tenant;
const ALL_TYPES = [
  { name: 'note', type: 'text' },
  { name: 'amount', type: 'number' },
  { name: 'hot', type: 'boolean' },
  { name: 'close_on', type: 'date' },
  { name: 'tier', type: 'select', options: ['gold', 'silver'] },
  { name: 'tags', type: 'multi_select', options: ['a', 'b', 'c'] },
  { name: 'email', type: 'email' },
  { name: 'site', type: 'url' },
  { name: 'region', type: 'text', required: true },
];

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' }, { publisher: true });
  tenant = await createTenant(t.app, { fields: ALL_TYPES });
});
afterAll(async () => t?.close());

const paths = (body: { errors: Array<{ path: string }> }) => body.errors.map((error) => error.path);
const base = () => ({ name: 'Deal', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] });

describe('custom fields', () => {
  it('round-trip every type, flattened to top-level keys in the documented order', async () => {
    const metadata = {
      note: 'hello',
      amount: 12.5,
      hot: true,
      close_on: '2026-12-01',
      tier: 'gold',
      tags: ['a', 'c'],
      email: 'buyer@example.com',
      site: 'https://example.com/x',
      region: 'EMEA',
    };
    const created = await createItem(t.app, tenant, { metadata, contact_id: 'c-1' });
    expect(Object.keys(created)).toEqual([
      'item_id',
      'short_id',
      'name',
      'pipeline',
      'stage',
      'status',
      'contact_id',
      'source',
      'external_id',
      'created_at',
      'updated_at',
      'version',
      ...ALL_TYPES.map((field) => field.name),
    ]);
    expect(created).toMatchObject({
      ...metadata,
      pipeline: tenant.pipelineId,
      stage: tenant.stageIds[0],
      status: null,
      source: 'api',
      version: 1,
    });
    expect(created.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const fetched = await ext(t.app, tenant.key, 'GET', `/items/${created.item_id}`);
    expect(fetched.json()).toEqual(created);
    expect(fetched.headers.etag).toBe('"1"');
    const stored = await t.db.collection('items').findOne({ _id: created.item_id as never });
    expect(stored?.custom).toEqual(metadata);
  });

  it('refuses dates that are not on the calendar instead of rolling them over', async () => {
    const body = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', { ...base(), metadata: { region: 'x', close_on: '2026-02-30' } }),
      400,
      'validation_failed',
    );
    expect(paths(body)).toEqual(['metadata.close_on']);
    expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', {
        ...base(),
        metadata: { region: 'x', close_on: '2026-02-30T10:00:00Z' },
      }),
      400,
      'validation_failed',
    );
  });

  it('normalises timestamps in date fields to UTC and shows unset fields as null', async () => {
    const created = await createItem(t.app, tenant, {
      metadata: { region: 'x', close_on: '2026-12-01T10:00:00+02:00' },
    });
    expect(created.close_on).toBe('2026-12-01T08:00:00.000Z');
    expect(created.note).toBeNull();
    expect(created.tags).toBeNull();
  });

  it('requires required fields on create and refuses to clear them', async () => {
    const missing = expectProblem(await ext(t.app, tenant.key, 'POST', '/items', base()), 400, 'validation_failed');
    expect(paths(missing)).toEqual(['metadata.region']);
    const item = await createItem(t.app, tenant, { metadata: { region: 'x' } });
    const cleared = expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { metadata: { region: null } }),
      400,
      'validation_failed',
    );
    expect(paths(cleared)).toEqual(['metadata.region']);
  });

  it('rejects unknown fields and wrong types, naming each metadata path', async () => {
    // Nine keys for nine fields: one more would be refused as a whole (DECISIONS.md section 12.4).
    const response = await ext(t.app, tenant.key, 'POST', '/items', {
      ...base(),
      metadata: {
        region: 'x',
        nope: 1,
        amount: '12',
        hot: 'yes',
        close_on: 'tomorrow',
        tier: 'bronze',
        tags: ['z'],
        email: 'not-mail',
        site: 'ftp://x',
      },
    });
    const body = expectProblem(response, 400, 'validation_failed');
    expect(paths(body).sort()).toEqual(
      [
        'metadata.amount',
        'metadata.close_on',
        'metadata.email',
        'metadata.hot',
        'metadata.nope',
        'metadata.site',
        'metadata.tags.0',
        'metadata.tier',
      ].sort(),
    );
  });

  it('merges metadata per key and clears a non-required field with null', async () => {
    const item = await createItem(t.app, tenant, { metadata: { region: 'x', note: 'keep', amount: 1 } });
    const patched = (
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { metadata: { amount: 2, tier: 'silver' } })
    ).json();
    expect(patched).toMatchObject({ note: 'keep', amount: 2, tier: 'silver', region: 'x', version: 2 });
    const cleared = (
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { metadata: { note: null } })
    ).json();
    expect(cleared).toMatchObject({ note: null, amount: 2, version: 3 });
    const stored = await t.db.collection('items').findOne({ _id: item.item_id as never });
    expect(stored?.custom).not.toHaveProperty('note');
  });
});

describe('create and update rules', () => {
  it('rejects unknown and output-only body fields', async () => {
    for (const extra of [
      { short_id: 'X' },
      { version: 5 },
      { created_at: '2026-01-01T00:00:00Z' },
      { colour: 'red' },
    ]) {
      const body = expectProblem(
        await ext(t.app, tenant.key, 'POST', '/items', { ...base(), metadata: { region: 'x' }, ...extra }),
        400,
        'validation_failed',
      );
      expect(paths(body)).toEqual(Object.keys(extra));
    }
    const item = await createItem(t.app, tenant, { metadata: { region: 'x' } });
    expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { short_id: 'X' }),
      400,
      'validation_failed',
    );
  });

  it('validates that pipeline, stage and status resolve in the caller company and pipeline', async () => {
    const other = await createTenant(t.app);
    const foreignPipeline = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', {
        ...base(),
        pipeline_id: other.pipelineId,
        metadata: { region: 'x' },
      }),
      400,
      'validation_failed',
    );
    expect(paths(foreignPipeline)).toEqual(['pipeline_id']);
    const foreignStage = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', {
        ...base(),
        stage_id: other.stageIds[0],
        status_id: other.statusIds[0],
        metadata: { region: 'x' },
      }),
      400,
      'validation_failed',
    );
    expect(paths(foreignStage).sort()).toEqual(['stage_id', 'status_id']);
    // With a schema problem too, errors[] still lists the reference problems of the well-typed fields.
    const mixed = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', {
        ...base(),
        name: '',
        stage_id: other.stageIds[0],
        status_id: 7,
        metadata: { region: 'x' },
      }),
      400,
      'validation_failed',
    );
    expect(paths(mixed).sort()).toEqual(['name', 'stage_id', 'status_id']);
    const unknownPipeline = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', { pipeline_id: other.pipelineId, stage_id: tenant.stageIds[0] }),
      400,
      'validation_failed',
    );
    expect(paths(unknownPipeline).sort()).toEqual(['name', 'pipeline_id']);
    // On PATCH too: the item's pipeline judges the well-formed stage while the name fails its schema.
    const item = await createItem(t.app, tenant, { metadata: { region: 'x' } });
    const patchMixed = expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: '', stage_id: other.stageIds[0] }),
      400,
      'validation_failed',
    );
    expect(paths(patchMixed).sort()).toEqual(['name', 'stage_id']);
    // Only well-formed values are looked up: an over-long id is the schema's problem alone.
    const overLong = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', { pipeline_id: 'p'.repeat(5_000), stage_id: tenant.stageIds[0] }),
      400,
      'validation_failed',
    );
    expect(overLong.errors.map((error: { path: string; message: string }) => error.path).sort()).toEqual([
      'name',
      'pipeline_id',
    ]);
  });

  it('increments version by exactly one per change, not on a no-op', async () => {
    const item = await createItem(t.app, tenant, { metadata: { region: 'x' } });
    const moved = (
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, {
        stage_id: tenant.stageIds[1],
        status_id: tenant.statusIds[0],
        version: 1,
      })
    ).json();
    expect(moved).toMatchObject({ stage: tenant.stageIds[1], status: tenant.statusIds[0], version: 2 });
    const same = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, {
      stage_id: tenant.stageIds[1],
      metadata: { region: 'x' },
    });
    expect(same.statusCode).toBe(200);
    expect(same.json()).toEqual(moved);
  });

  it('answers a stale version with 409 and a stale If-Match with 412, changing nothing', async () => {
    const item = await createItem(t.app, tenant, { metadata: { region: 'x' } });
    await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'v2' });
    const conflict = expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'v3', version: 1 }),
      409,
      'version_conflict',
    );
    expect(conflict.current_version).toBe(2);
    // A version that can never have been current is just as stale.
    for (const version of [0, -1]) {
      expect(
        expectProblem(
          await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'v3', version }),
          409,
          'version_conflict',
        ).current_version,
      ).toBe(2);
    }
    const precondition = expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'v3' }, { 'if-match': '"1"' }),
      412,
      'precondition_failed',
    );
    expect(precondition.current_version).toBe(2);
    // If-Match compares strongly (RFC 9110 section 13.1.1): a weak tag of the current version never matches.
    for (const weak of ['W/"2"', 'w/"2"', ' W/"2" ', 'W/"1", W/"2"']) {
      const refused = await ext(
        t.app,
        tenant.key,
        'PATCH',
        `/items/${item.item_id}`,
        { name: 'v3' },
        { 'if-match': weak },
      );
      expect(expectProblem(refused, 412, 'precondition_failed').current_version, weak).toBe(2);
    }
    const ok = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'v3' }, { 'if-match': '"2"' });
    expect(ok.json()).toMatchObject({ name: 'v3', version: 3 });
    expect(ok.headers.etag).toBe('"3"');
    const any = await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'v4' }, { 'if-match': '*' });
    expect(any.json()).toMatchObject({ name: 'v4', version: 4 });
  });

  it('lets exactly one of 20 concurrent PATCHes with the same version win', async () => {
    const item = await createItem(t.app, tenant, { metadata: { region: 'x' } });
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: `writer ${i}`, version: 1 }),
      ),
    );
    const winners = responses.filter((response) => response.statusCode === 200);
    const losers = responses.filter((response) => response.statusCode === 409);
    expect(winners).toHaveLength(1);
    expect(losers).toHaveLength(19);
    for (const loser of losers) expect(loser.json().current_version).toBe(2);
    const final = (await ext(t.app, tenant.key, 'GET', `/items/${item.item_id}`)).json();
    expect(final.version).toBe(2);
    expect(final.name).toBe(must(winners[0], 'a winner').json().name);
  });

  it('gives 200 concurrent creates 200 distinct short ids, and each company its own sequence', async () => {
    const own = await createTenant(t.app);
    const responses = await Promise.all(
      Array.from({ length: 200 }, () =>
        ext(t.app, own.key, 'POST', '/items', { name: 'n', pipeline_id: own.pipelineId, stage_id: own.stageIds[0] }),
      ),
    );
    expect(responses.every((response) => response.statusCode === 201)).toBe(true);
    const shortIds = new Set(responses.map((response) => response.json().short_id));
    expect(shortIds.size).toBe(200);
    for (const shortId of shortIds) expect(shortId.length).toBeLessThanOrEqual(12);
    const second = await createTenant(t.app);
    expect((await createItem(t.app, second)).short_id).toBe('I-1');
    expect(shortIds.has('I-1') && shortIds.has('I-200')).toBe(true);
  });
});

describe('tenant isolation', () => {
  it('answers 404 for another company item on every item route and changes nothing', async () => {
    const other = await createTenant(t.app);
    const foreign = await createItem(t.app, other);
    expectProblem(await ext(t.app, tenant.key, 'GET', `/items/${foreign.item_id}`), 404, 'not_found');
    expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${foreign.item_id}`, { name: 'hijack' }),
      404,
      'not_found',
    );
    expectProblem(await ext(t.app, tenant.key, 'GET', '/items/itm_000000000000000000000000'), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'GET', '/items/%24where'), 404, 'not_found');
    // An over-long id is checked like any other: 401 without a key, a 404 that took its rate-limit slot with one.
    expectProblem(await ext(t.app, undefined, 'GET', `/items/${'x'.repeat(10_000)}`), 401, 'unauthorized');
    const overLong = await ext(t.app, tenant.key, 'PATCH', `/items/${'x'.repeat(10_000)}`, { name: 'long' });
    expectProblem(overLong, 404, 'not_found');
    expect(overLong.headers['ratelimit-remaining']).toBeDefined();
    const list = (await ext(t.app, tenant.key, 'GET', `/items?pipeline_id=${other.pipelineId}`)).json();
    expect(list).toEqual([]);
    const after = (await ext(t.app, other.key, 'GET', `/items/${foreign.item_id}`)).json();
    expect(after).toEqual(foreign);
  });
});

describe('events recorded with the change', () => {
  it('records item.created and item.updated with changes, each once', async () => {
    const item = await createItem(t.app, tenant, { metadata: { region: 'x' } });
    await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, {
      stage_id: tenant.stageIds[2],
      metadata: { amount: 3 },
    });
    const events = await feedOf(t.app, tenant.key, item.item_id, 2);
    expect(events.map((event) => event.type)).toEqual(['item.created', 'item.updated']);
    expect(events[0]).toMatchObject({ company_id: tenant.companyId, data: { item_id: item.item_id, version: 1 } });
    expect(events[1]!.changes).toEqual({
      stage: { from: tenant.stageIds[0], to: tenant.stageIds[2] },
      amount: { from: null, to: 3 },
    });
    expect(events[1]!.data.version).toBe(2);
    expect(new Set(events.map((event) => event.event_id)).size).toBe(2);
  });
});
