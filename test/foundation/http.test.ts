import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { admin, expectProblem } from '../helpers/fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => t?.close());

const adminHeaders = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

describe('HTTP conventions', () => {
  it('answers an unknown route with a 404 problem (after authentication under /v1/ext/)', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/nothing-here' });
    const body = expectProblem(response, 404, 'not_found');
    expect(body.request_id).toBe(response.headers['x-request-id']);
    expectProblem(await t.app.inject({ method: 'GET', url: '/v1/ext/nothing-here' }), 401, 'unauthorized');
    // An over-long id is checked like any other: 401 without a key.
    expectProblem(await t.app.inject({ method: 'GET', url: `/v1/ext/items/${'x'.repeat(150)}` }), 401, 'unauthorized');
    // The admin API checks its token on every call, unknown paths and over-long ids included.
    expectProblem(await t.app.inject({ method: 'GET', url: '/v1/admin/nothing-here' }), 401, 'unauthorized');
    expectProblem(
      await t.app.inject({ method: 'GET', url: `/v1/admin/companies/${'c'.repeat(10_000)}` }),
      401,
      'unauthorized',
    );
    expectProblem(
      await t.app.inject({ method: 'GET', url: '/v1/admin/nothing-here', headers: adminHeaders }),
      404,
      'not_found',
    );
  });

  it('reuses a sane incoming x-request-id and replaces an insane one', async () => {
    const reused = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'abc-123' } });
    expect(reused.headers['x-request-id']).toBe('abc-123');
    const replaced = await t.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'bad id\twith spaces' },
    });
    expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('rejects malformed JSON with 400 invalid_json', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/admin/companies',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      payload: '{"name": ',
    });
    expectProblem(response, 400, 'invalid_json');
  });

  it('rejects a body that is not JSON with 415', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/admin/companies',
      headers: { ...adminHeaders, 'content-type': 'text/plain' },
      payload: 'name=x',
    });
    expectProblem(response, 415, 'unsupported_media_type');
  });

  it('rejects a body over 1 MiB with 413', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/admin/companies',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }),
    });
    expectProblem(response, 413, 'payload_too_large');
  });

  it('treats an empty body with a JSON content type as no body, not as invalid JSON', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/admin/companies',
      headers: { ...adminHeaders, 'content-type': 'application/json' },
    });
    const body = expectProblem(response, 400, 'validation_failed');
    expect(body.code).not.toBe('invalid_json');
  });

  it('accepts the bearer scheme in any case', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/admin/companies',
      headers: { authorization: `bearer ${TEST_ADMIN_TOKEN}` },
      payload: { name: 'Case Co' },
    });
    expect(response.statusCode).toBe(201);
  });

  it('lists every problem of an invalid body, unknown fields included', async () => {
    const response = await admin(t.app, 'POST', '/companies', {
      name: '',
      colour: 'red',
      subscription_status: 'maybe',
    });
    const body = expectProblem(response, 400, 'validation_failed');
    const paths = body.errors.map((error: { path: string }) => error.path).sort();
    expect(paths).toEqual(['colour', 'name', 'subscription_status']);
  });

  it('reports health and readiness with each dependency', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ mongo: 'ok', redis: 'ok' });
  });
});

describe('when things break', () => {
  it('readyz is 503 while MongoDB is unreachable and API calls answer 503 unavailable', async () => {
    const client = new MongoClient('mongodb://127.0.0.1:1', { serverSelectionTimeoutMS: 300 });
    const app = await buildApp({ config: t.config, db: client.db('x'), redis: t.redis });
    try {
      const ready = await app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toMatchObject({ mongo: 'down' });
      const call = await app.inject({ method: 'GET', url: '/v1/admin/companies/cmp_x', headers: adminHeaders });
      expectProblem(call, 503, 'unavailable');
      expect(call.headers['retry-after']).toBeDefined();
    } finally {
      await app.close().catch(() => {});
      await client.close();
    }
  });

  it('never shows a stack trace or internal message for a bug', async () => {
    const app = await buildApp({ config: t.config, db: t.db, redis: t.redis });
    app.get('/boom', async () => {
      throw new Error('secret internal detail at db.js:42');
    });
    const response = await app.inject({ method: 'GET', url: '/boom' });
    const body = expectProblem(response, 500, 'internal');
    expect(JSON.stringify(body)).not.toContain('secret internal detail');
    await app.close();
  });
});
