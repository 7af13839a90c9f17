import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { must } from '../../src/shared/must.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createItem, createKey, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
});
afterAll(async () => t?.close());

const SORTS = ['created_at', '-created_at', 'updated_at', '-updated_at'] as const;

describe('listing items', () => {
  let tenant: Tenant;
  let preExisting: string[];

  beforeAll(async () => {
    tenant = await createTenant(t.app);
    preExisting = [];
    for (let batch = 0; batch < 20; batch++) {
      const created = await Promise.all(
        Array.from({ length: 50 }, (_, i) => createItem(t.app, tenant, { name: `item ${batch * 50 + i}` })),
      );
      preExisting.push(...created.map((item) => item.item_id));
    }
  }, 120_000);

  it.each(SORTS)(
    'pages 1,000 items with limit=37 sorted by %s while new ones arrive: each exactly once, in order',
    async (sort) => {
      const field = sort.replace('-', '') as 'created_at' | 'updated_at';
      const direction = sort.startsWith('-') ? -1 : 1;
      const seen: Array<{ item_id: string; created_at: string; updated_at: string }> = [];
      let url: string | undefined = `/items?limit=37&sort=${sort}`;
      let pages = 0;
      while (url) {
        const response = await ext(t.app, tenant.key, 'GET', url);
        expect(response.statusCode, response.body).toBe(200);
        const page = response.json();
        expect(page.length).toBeLessThanOrEqual(37);
        seen.push(...page);
        pages++;
        await createItem(t.app, tenant, { name: `late ${sort} ${pages}` }); // records created while paging
        const next = response.headers['x-next-cursor'] as string | undefined;
        if (next) {
          const link = response.headers.link as string;
          expect(link).toMatch(/^<\/v1\/ext\/items\?.*cursor=.*>; rel="next"$/);
          url = link.slice(link.indexOf('<') + 1 + '/v1/ext'.length, link.indexOf('>'));
          expect(url).toContain(`cursor=${encodeURIComponent(next)}`);
        } else url = undefined;
      }
      const ids = seen.map((item) => item.item_id);
      expect(new Set(ids).size).toBe(ids.length);
      const seenSet = new Set(ids);
      expect(preExisting.filter((id) => !seenSet.has(id))).toEqual([]);
      for (let i = 1; i < seen.length; i++) {
        const a = must(seen[i - 1], 'the previous row');
        const b = must(seen[i], 'this row');
        // 1 when the pair is in ascending order, -1 when descending.
        const cmp = a[field] === b[field] ? (a.item_id < b.item_id ? 1 : -1) : a[field] < b[field] ? 1 : -1;
        expect(cmp, JSON.stringify([i, a, b])).toBe(direction);
      }
    },
    60_000,
  );

  it('filters by pipeline, stage, status, contact and time', async () => {
    const own = await createTenant(t.app);
    const a = await createItem(t.app, own, { contact_id: 'c-7', status_id: own.statusIds[0] });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const b = await createItem(t.app, own, { stage_id: own.stageIds[1] });
    const ids = async (query: string) =>
      (await ext(t.app, own.key, 'GET', `/items?${query}`)).json().map((item: { item_id: string }) => item.item_id);
    expect(await ids(`pipeline_id=${own.pipelineId}`)).toEqual([a.item_id, b.item_id]);
    expect(await ids(`stage_id=${own.stageIds[1]}`)).toEqual([b.item_id]);
    expect(await ids(`status_id=${own.statusIds[0]}`)).toEqual([a.item_id]);
    expect(await ids('contact_id=c-7')).toEqual([a.item_id]);
    expect(await ids(`created_after=${encodeURIComponent(a.created_at)}`)).toEqual([b.item_id]);
    expect(await ids(`updated_after=${encodeURIComponent(a.updated_at)}&sort=-updated_at`)).toEqual([b.item_id]);
    expect(await ids('sort=-created_at')).toEqual([b.item_id, a.item_id]);
    // A calendar date means its start in UTC; an offset's '+' sent unencoded (arriving as a space) still counts.
    expect(await ids('created_after=2000-01-01&sort=-created_at')).toEqual([b.item_id, a.item_id]);
    expect(await ids('created_after=2999-01-01')).toEqual([]);
    expect(await ids(`created_after=${a.created_at.replace('Z', '+00:00')}`)).toEqual([b.item_id]);
    expectProblem(await ext(t.app, own.key, 'GET', '/items?created_after=2026-02-30'), 400, 'validation_failed');
  });

  it('rejects bad limits, sorts, unknown parameters and tampered or foreign cursors with 400', async () => {
    for (const query of [
      'limit=0',
      'limit=201',
      'limit=abc',
      'sort=name',
      'created_after=yesterday',
      'colour=red',
      'cursor=abc',
    ]) {
      expectProblem(await ext(t.app, tenant.key, 'GET', `/items?${query}`), 400, 'validation_failed');
    }
    const first = await ext(t.app, tenant.key, 'GET', '/items?limit=2');
    const cursor = first.headers['x-next-cursor'] as string;
    expect(cursor).toBeTruthy();
    const [body = '', signature = ''] = cursor.split('.');
    const tampered = `${Buffer.from(Buffer.from(body, 'base64url').toString().replace('"itm_', '"itm_0')).toString('base64url')}.${signature}`;
    expectProblem(await ext(t.app, tenant.key, 'GET', `/items?limit=2&cursor=${tampered}`), 400, 'validation_failed');
    expectProblem(
      await ext(t.app, tenant.key, 'GET', `/items?limit=2&sort=-created_at&cursor=${cursor}`),
      400,
      'validation_failed',
    );
    const other = await createTenant(t.app);
    expectProblem(await ext(t.app, other.key, 'GET', `/items?limit=2&cursor=${cursor}`), 400, 'validation_failed');
    expect((await ext(t.app, tenant.key, 'GET', `/items?limit=2&cursor=${cursor}`)).statusCode).toBe(200);
  });
});

describe('check-duplicates', () => {
  it('matches any configured field, case-insensitively and whitespace-normalised, and creates nothing', async () => {
    const tenant = await createTenant(t.app, {
      duplicate_detection: { fields: ['name', 'contact_id', 'industry'], match: 'any', case_insensitive: true },
    });
    const a = await createItem(t.app, tenant, { name: 'Acme   Corp ', contact_id: 'c-1' });
    const b = await createItem(t.app, tenant, { name: 'Other', metadata: { industry: 'retail' } });
    await createItem(t.app, tenant, { name: 'Unrelated' });
    const before = await t.db.collection('items').countDocuments();
    const response = await ext(t.app, tenant.key, 'POST', '/items/check-duplicates', {
      pipeline_id: tenant.pipelineId,
      name: ' acme corp',
      metadata: { industry: 'retail' },
    });
    expect(response.statusCode).toBe(200);
    const result = response.json();
    expect(result.has_duplicates).toBe(true);
    expect(result.matches.map((match: { item: { item_id: string } }) => match.item.item_id)).toEqual([
      b.item_id,
      a.item_id,
    ]);
    expect(result.matches[0].matched_fields).toEqual(['industry']);
    expect(result.matches[1].matched_fields).toEqual(['name']);
    expect(result.matches[1].item).toEqual(a);
    expect(await t.db.collection('items').countDocuments()).toBe(before);
    const none = (
      await ext(t.app, tenant.key, 'POST', '/items/check-duplicates', {
        pipeline_id: tenant.pipelineId,
        name: 'nobody',
      })
    ).json();
    expect(none).toEqual({ has_duplicates: false, matches: [] });
  });

  it('with match=all needs every field to match, and case-sensitive config compares exactly', async () => {
    const tenant = await createTenant(t.app, {
      duplicate_detection: { fields: ['name', 'contact_id'], match: 'all', case_insensitive: false },
    });
    const a = await createItem(t.app, tenant, { name: 'Acme', contact_id: 'c-1' });
    await createItem(t.app, tenant, { name: 'Acme', contact_id: 'c-2' });
    const check = async (body: object) =>
      (
        await ext(t.app, tenant.key, 'POST', '/items/check-duplicates', { pipeline_id: tenant.pipelineId, ...body })
      ).json();
    const both = await check({ name: 'Acme', contact_id: 'c-1' });
    expect(both.matches.map((match: { item: { item_id: string } }) => match.item.item_id)).toEqual([a.item_id]);
    expect(both.matches[0].matched_fields).toEqual(['name', 'contact_id']);
    expect((await check({ name: 'acme', contact_id: 'c-1' })).has_duplicates).toBe(false);
    expect((await check({ name: 'Acme' })).has_duplicates).toBe(false);
  });

  it('never looks into another company and needs items:read', async () => {
    const tenant = await createTenant(t.app);
    const other = await createTenant(t.app);
    await createItem(t.app, other, { name: 'Secret deal' });
    expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items/check-duplicates', {
        pipeline_id: other.pipelineId,
        name: 'Secret deal',
      }),
      400,
      'validation_failed',
    );
    const writeOnly = await createKey(t.app, tenant.companyId, tenant.userId, ['items:write']);
    expectProblem(
      await ext(t.app, writeOnly.key, 'POST', '/items/check-duplicates', { pipeline_id: tenant.pipelineId, name: 'x' }),
      403,
      'insufficient_scope',
    );
  });
});

describe('Idempotency-Key', () => {
  it('10 concurrent identical POSTs create one item; duplicates in flight get 409, later retries replay it', async () => {
    const tenant = await createTenant(t.app);
    const body = { name: 'Once', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] };
    const send = () => ext(t.app, tenant.key, 'POST', '/items', body, { 'idempotency-key': 'create-once' });
    const responses = await Promise.all(Array.from({ length: 10 }, send));
    const created = responses.filter((response) => response.statusCode === 201);
    const inFlight = responses.filter((response) => response.statusCode === 409);
    expect(created.length + inFlight.length).toBe(10);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const response of inFlight) expectProblem(response, 409, 'idempotency_in_progress');
    const first = must(created[0], 'a created response');
    const itemId = first.json().item_id;
    expect(created.every((response) => response.json().item_id === itemId)).toBe(true);
    const retries = await Promise.all(Array.from({ length: 10 }, send));
    for (const retry of retries) {
      expect(retry.statusCode).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.json().item_id).toBe(itemId);
      expect(retry.headers.etag).toBe(first.headers.etag); // the first response's headers too
    }
    expect(await t.db.collection('items').countDocuments({ company_id: tenant.companyId })).toBe(1);
  });

  it('a different body with the same key is 422, and another API key is independent', async () => {
    const tenant = await createTenant(t.app);
    const body = { name: 'Once', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] };
    const first = await ext(t.app, tenant.key, 'POST', '/items', body, { 'idempotency-key': 'k1' });
    expect(first.statusCode).toBe(201);
    expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', { ...body, name: 'Twice' }, { 'idempotency-key': 'k1' }),
      422,
      'idempotency_mismatch',
    );
    const secondKey = await createKey(t.app, tenant.companyId, tenant.userId);
    const independent = await ext(t.app, secondKey.key, 'POST', '/items', body, { 'idempotency-key': 'k1' });
    expect(independent.statusCode).toBe(201);
    expect(independent.json().item_id).not.toBe(first.json().item_id);
    expect(await t.db.collection('items').countDocuments({ company_id: tenant.companyId })).toBe(2);
    const stored = await t.db.collection('idempotency_keys').findOne({ idempotency_key: 'k1' });
    expect(stored?.expires_at.getTime() - stored?.created_at.getTime()).toBe(24 * 3600 * 1000);
  });

  it('does not keep a response for a request that failed validation', async () => {
    const tenant = await createTenant(t.app);
    const bad = await ext(t.app, tenant.key, 'POST', '/items', { name: '' }, { 'idempotency-key': 'k2' });
    expect(bad.statusCode).toBe(400);
    const good = await ext(
      t.app,
      tenant.key,
      'POST',
      '/items',
      { name: 'ok', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] },
      { 'idempotency-key': 'k2' },
    );
    expect(good.statusCode).toBe(201);
  });
});
