import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createItem, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

/** Issue 16: what a hostile tenant found in one web process (findings 2 and 6 and the smaller ones). */
let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await createTenant(t.app, {
    fields: [
      { name: 'deal_value', type: 'number' },
      { name: 'close_on', type: 'date' },
      { name: 'tags', type: 'multi_select', options: ['a', 'b'] },
    ],
  });
});
afterAll(async () => t?.close());

const itemBase = () => ({ name: 'Deal', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] });
const unknownKeys = (count: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`junk_${i}`, 1]));
const paths = (body: { errors: Array<{ path: string }> }) => body.errors.map((error) => error.path);

describe('errors[] is capped at 100 entries', () => {
  it('in every place that can produce many problems: item, task and hook bodies, list queries, admin bodies', async () => {
    const cases = [
      ext(t.app, tenant.key, 'POST', '/items', { ...itemBase(), ...unknownKeys(150) }),
      ext(t.app, tenant.key, 'POST', '/tasks', { title: 'x', due_at: '2026-11-22T09:30:00Z', ...unknownKeys(150) }),
      ext(t.app, tenant.key, 'POST', '/hooks', {
        target_url: 'https://example.com/h',
        event: 'item.created',
        ...unknownKeys(150),
      }),
      ext(t.app, tenant.key, 'GET', `/items?${new URLSearchParams(unknownKeys(150) as never).toString()}`),
      admin(t.app, 'POST', `/companies/${tenant.companyId}/pipelines`, {
        name: 'P',
        stages: [{ name: 'S' }],
        fields: Array.from({ length: 100 }, () => ({ name: '$bad', type: 'nope' })),
      }),
    ];
    for (const response of await Promise.all(cases)) {
      const body = expectProblem(response, 400, 'validation_failed');
      expect(body.errors).toHaveLength(100);
      expect(body.errors_truncated).toBe(true);
      expect(body.detail).toMatch(/and (1\d\d|\d{3,}) more\)$/);
    }
  });

  it('a short list is whole and carries no errors_truncated', async () => {
    const body = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', { ...itemBase(), ...unknownKeys(100) }),
      400,
      'validation_failed',
    );
    expect(body.errors).toHaveLength(100);
    expect(body).not.toHaveProperty('errors_truncated');
  });
});

describe('oversize bodies are refused before their members are judged', () => {
  it('metadata with more keys than the pipeline has fields is one problem at metadata', async () => {
    const body = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', {
        ...itemBase(),
        metadata: { deal_value: 1, a: 1, b: 2, c: 3 },
      }),
      400,
      'validation_failed',
    );
    expect(body.errors).toEqual([{ path: 'metadata', message: 'has 4 keys but this pipeline has 3 custom fields' }]);
    const item = await createItem(t.app, tenant);
    const update = expectProblem(
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { metadata: unknownKeys(4) }),
      400,
      'validation_failed',
    );
    expect(paths(update)).toEqual(['metadata']);
  });

  it('a 1 MiB body of 90,000 metadata keys gets a small 400 naming the container', async () => {
    const members = Array.from({ length: 90_000 }, (_, i) => `"k${i}":0`).join(',');
    const payload = `{"name":"x","pipeline_id":"${tenant.pipelineId}","stage_id":"${tenant.stageIds[0]}","metadata":{${members}}}`;
    expect(payload.length).toBeLessThanOrEqual(1024 * 1024);
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/ext/items',
      headers: { 'x-api-key': tenant.key, 'content-type': 'application/json' },
      payload,
    });
    const body = expectProblem(response, 400, 'validation_failed');
    expect(body.errors).toEqual([{ path: 'metadata', message: 'has more than 1000 members' }]);
    expect(response.body.length).toBeLessThan(1_000);
  });

  it('many containers just under the member limit are refused as a whole', async () => {
    const array = `[${Array.from({ length: 999 }, () => '0').join(',')}]`;
    const members = Array.from({ length: 60 }, (_, i) => `"k${i}":${array}`).join(',');
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/ext/items',
      headers: { 'x-api-key': tenant.key, 'content-type': 'application/json' },
      payload: `{${members}}`,
    });
    const body = expectProblem(response, 400, 'validation_failed');
    expect(body.errors).toEqual([{ path: '', message: 'holds more than 50000 values in all' }]);
  });

  it('wide arrays and deep nesting are refused with their path, elsewhere too (admin bodies)', async () => {
    const wide = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', {
        ...itemBase(),
        metadata: { tags: Array.from({ length: 5_000 }, () => 'x') },
      }),
      400,
      'validation_failed',
    );
    expect(wide.errors).toEqual([{ path: 'metadata.tags', message: 'has more than 1000 members' }]);
    let deep: unknown = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    const nested = expectProblem(
      await admin(t.app, 'POST', '/companies', { name: 'x', deep }),
      400,
      'validation_failed',
    );
    expect(nested.errors[0].message).toBe('is nested deeper than 64 levels');
    expect(nested.errors[0].path).toMatch(/^deep(\.0)+$/);
  });
});

describe('custom-field names that are Object.prototype members', () => {
  it('are refused by the admin API on create and on PATCH', async () => {
    const names = ['toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString'];
    const created = expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/pipelines`, {
        name: 'P',
        stages: [{ name: 'S' }],
        fields: names.map((name) => ({ name, type: 'text' })),
      }),
      400,
      'validation_failed',
    );
    expect(paths(created)).toEqual(names.map((_, index) => `fields.${index}.name`));
    const patched = expectProblem(
      await admin(t.app, 'PATCH', `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`, {
        fields: [{ name: 'valueOf', type: 'number' }],
      }),
      400,
      'validation_failed',
    );
    expect(paths(patched)).toEqual(['fields.0.name']);
  });

  it('stored before the rule (inserted into MongoDB), still work: create, update, clear and GET keep the key', async () => {
    const legacy = await createTenant(t.app, { fields: [{ name: 'deal_value', type: 'number' }] });
    await t.db.collection('pipelines').updateOne(
      { _id: legacy.pipelineId as never },
      {
        $push: {
          fields: {
            $each: [
              { name: 'toString', type: 'text', required: false },
              { name: 'valueOf', type: 'number', required: false },
            ],
          },
        } as never,
        $inc: { revision: 1 },
      },
    );
    const create = await ext(t.app, legacy.key, 'POST', '/items', {
      name: 'Old data',
      pipeline_id: legacy.pipelineId,
      stage_id: legacy.stageIds[0],
      metadata: { deal_value: 5 },
    });
    expect(create.statusCode, create.body).toBe(201);
    expect(create.json()).toMatchObject({ deal_value: 5, toString: null, valueOf: null });

    const itemId = create.json().item_id;
    const set = await ext(t.app, legacy.key, 'PATCH', `/items/${itemId}`, { metadata: { toString: 'hi', valueOf: 7 } });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ toString: 'hi', valueOf: 7, version: 2 });

    const cleared = await ext(t.app, legacy.key, 'PATCH', `/items/${itemId}`, { metadata: { toString: null } });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect(cleared.json()).toMatchObject({ toString: null, valueOf: 7, version: 3 });

    const read = await ext(t.app, legacy.key, 'GET', `/items/${itemId}`);
    expect(read.statusCode).toBe(200);
    expect(Object.keys(read.json())).toEqual(expect.arrayContaining(['deal_value', 'toString', 'valueOf']));
    expect(read.json()).toMatchObject({ deal_value: 5, toString: null, valueOf: 7 });
    const stored = await t.db.collection('items').findOne({ _id: itemId as never });
    expect(stored?.custom).toEqual({ deal_value: 5, valueOf: 7 });

    const wrongType = expectProblem(
      await ext(t.app, legacy.key, 'PATCH', `/items/${itemId}`, { metadata: { toString: 3 } }),
      400,
      'validation_failed',
    );
    expect(paths(wrongType)).toEqual(['metadata.toString']);
  });
});

describe('query strings and cursors', () => {
  it('a cursor with anything appended is refused', async () => {
    await createItem(t.app, tenant);
    await createItem(t.app, tenant);
    const first = await ext(t.app, tenant.key, 'GET', '/items?limit=1');
    const cursor = String(first.headers['x-next-cursor']);
    expect(cursor).toMatch(/^[\w-]+\.[\w-]+$/);
    expect((await ext(t.app, tenant.key, 'GET', `/items?limit=1&cursor=${cursor}`)).statusCode).toBe(200);
    for (const tampered of [`${cursor}.junk`, `${cursor}.`, `.${cursor}`]) {
      const body = expectProblem(
        await ext(t.app, tenant.key, 'GET', `/items?limit=1&cursor=${encodeURIComponent(tampered)}`),
        400,
        'validation_failed',
      );
      expect(paths(body)).toEqual(['cursor']);
    }
  });

  it('limit takes decimal integers only, on every list', async () => {
    const lists = ['/items', '/tasks', '/pipelines', '/hooks'];
    for (const list of lists) {
      expect((await ext(t.app, tenant.key, 'GET', `${list}?limit=16`)).statusCode, list).toBe(200);
      for (const limit of ['0x10', '1e2', '16.0', '%2016', '+16', '0b1']) {
        const body = expectProblem(
          await ext(t.app, tenant.key, 'GET', `${list}?limit=${limit}`),
          400,
          'validation_failed',
        );
        expect(paths(body), `${list} ${limit}`).toEqual(['limit']);
      }
    }
    expectProblem(
      await admin(t.app, 'GET', `/companies/${tenant.companyId}/automation-runs?limit=0x10`),
      400,
      'validation_failed',
    );
  });
});

describe('refusals say what to send', () => {
  it('limit out of range (or not a number) names the range, on the lists and the feed', async () => {
    for (const list of ['/items', '/tasks', '/hooks', '/events'])
      for (const limit of ['0', '250', 'ten']) {
        const body = expectProblem(
          await ext(t.app, tenant.key, 'GET', `${list}?limit=${limit}`),
          400,
          'validation_failed',
        );
        expect(body.errors, `${list} ${limit}`).toEqual([
          { path: 'limit', message: 'expected an integer from 1 to 200' },
        ]);
        expect(body.detail).toBe('limit: expected an integer from 1 to 200');
      }
    const wait = expectProblem(await ext(t.app, tenant.key, 'GET', '/events?wait=31'), 400, 'validation_failed');
    expect(wait.errors).toEqual([{ path: 'wait', message: 'expected an integer from 0 to 30' }]);
  });

  it('a missing field is named as required, beside the other problems', async () => {
    const body = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/tasks', { priority: 'urgent' }),
      400,
      'validation_failed',
    );
    expect(body.errors).toEqual(
      expect.arrayContaining([
        { path: 'title', message: 'required field (expected string)' },
        { path: 'due_at', message: 'required field (expected string)' },
      ]),
    );
    expect(body.detail).not.toContain('received undefined');
  });
});

describe('timestamps stay within four-digit years', () => {
  it('an input whose UTC instant falls outside 0000-9999 is refused; the edges are accepted and render as given', async () => {
    const post = (due_at: string) => ext(t.app, tenant.key, 'POST', '/tasks', { title: 'x', due_at });
    for (const due_at of ['9999-12-31T23:30:00-01:00', '0000-01-01T00:30:00+01:00']) {
      expect(paths(expectProblem(await post(due_at), 400, 'validation_failed'))).toEqual(['due_at']);
    }
    const last = await post('9999-12-31T22:59:59.999-01:00');
    expect(last.statusCode, last.body).toBe(201);
    expect(last.json().due_at).toBe('9999-12-31T23:59:59.999Z');
    const first = await post('0000-01-01T01:00:00+01:00');
    expect(first.statusCode, first.body).toBe(201);
    expect(first.json().due_at).toBe('0000-01-01T00:00:00.000Z');
    const early = await post('0050-06-01T00:00:00Z');
    expect(early.statusCode, early.body).toBe(201);
    expect(early.json().due_at).toBe('0050-06-01T00:00:00.000Z');

    expectProblem(
      await ext(t.app, tenant.key, 'GET', `/items?created_after=${encodeURIComponent('9999-12-31T23:30:00-01:00')}`),
      400,
      'validation_failed',
    );
    const date = expectProblem(
      await ext(t.app, tenant.key, 'POST', '/items', {
        ...itemBase(),
        metadata: { close_on: '9999-12-31T23:30:00-01:00' },
      }),
      400,
      'validation_failed',
    );
    expect(paths(date)).toEqual(['metadata.close_on']);
  });
});

describe('idempotent replay keeps only answers of requests that did their work', () => {
  it('a reference 400 and a 404 are not replayed: the retry runs again; a 201 is replayed', async () => {
    const headers = (key: string) => ({ 'idempotency-key': key });
    const badReference = { ...itemBase(), stage_id: 'stg_000000000000000000000000' };
    for (let attempt = 0; attempt < 2; attempt++) {
      const response = await ext(t.app, tenant.key, 'POST', '/items', badReference, headers('ref-400'));
      expectProblem(response, 400, 'validation_failed');
      expect(response.headers['idempotent-replayed']).toBeUndefined();
    }
    const missing = `/hooks/hook_000000000000000000000000/deliveries/evt_000000000000000000000000/redeliver`;
    for (let attempt = 0; attempt < 2; attempt++) {
      const response = await ext(t.app, tenant.key, 'POST', missing, undefined, headers('missing-404'));
      expectProblem(response, 404, 'not_found');
      expect(response.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(
      await t.db
        .collection('idempotency_keys')
        .countDocuments({ idempotency_key: { $in: ['ref-400', 'missing-404'] } }),
    ).toBe(0);

    const created = await ext(t.app, tenant.key, 'POST', '/items', itemBase(), headers('created-201'));
    expect(created.statusCode).toBe(201);
    const again = await ext(t.app, tenant.key, 'POST', '/items', itemBase(), headers('created-201'));
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().item_id).toBe(created.json().item_id);
  });
});
