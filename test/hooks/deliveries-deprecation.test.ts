import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, ext, type Tenant } from '../helpers/fixtures.js';

// docs/versioning.md: a deprecated field stays until its sunset, and every answer that carries it says so.
let t: TestApp;
let tenant: Tenant;
let hookId: string;
beforeAll(async () => {
  t = await buildTestApp();
  tenant = await createTenant(t.app);
  hookId = (
    await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: 'http://127.0.0.1:9/x', events: ['task.created'] })
  ).json().hook_id;
  // One recorded attempt, as the hooks worker writes it.
  await t.db.collection('deliveries').insertOne({
    _id: `${hookId}:evt_6740b7a1c2d3e4f5a6b7c8d9` as never,
    company_id: tenant.companyId,
    hook_id: hookId,
    automation_id: null,
    event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9',
    event_type: 'task.created',
    event: {},
    attempts: [
      {
        attempt: 1,
        status_code: 503,
        error: null,
        duration_ms: 3,
        succeeded: false,
        next_retry_at: new Date('2030-01-01T00:00:00Z'),
        attempted_at: new Date(),
      },
    ],
    created_at: new Date(),
    updated_at: new Date(),
  });
});
afterAll(async () => t?.close());

describe("the deliveries log's old field names", () => {
  it('are still there beside the new ones, and the answer carries Deprecation and Sunset', async () => {
    const answer = await ext(t.app, tenant.key, 'GET', `/hooks/${hookId}/deliveries`);
    expect(answer.statusCode).toBe(200);
    const [attempt] = answer.json();
    expect(attempt).toMatchObject({
      type: 'task.created',
      event_type: 'task.created',
      response_status: 503,
      status_code: 503,
      next_attempt_at: '2030-01-01T00:00:00.000Z',
      next_retry_at: '2030-01-01T00:00:00.000Z',
    });
    expect(answer.headers.deprecation).toBe(`@${Date.UTC(2026, 11, 7) / 1000}`);
    expect(answer.headers.sunset).toBe('Wed, 30 Jun 2027 00:00:00 GMT');
  });

  it('announces nothing where no deprecated field is sent: other routes, and refusals', async () => {
    const hooks = await ext(t.app, tenant.key, 'GET', '/hooks');
    expect(hooks.statusCode).toBe(200);
    expect(hooks.headers.deprecation).toBeUndefined();
    const unknown = await ext(t.app, tenant.key, 'GET', '/hooks/hk_000000000000000000000000/deliveries');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers.deprecation).toBeUndefined();
    expect(unknown.headers.sunset).toBeUndefined();
  });

  it('are marked deprecated in the OpenAPI document, whose answer documents both headers', async () => {
    const document = (await t.app.inject({ method: 'GET', url: '/v1/ext/openapi.json' })).json();
    const properties = document.components.schemas.HookDeliveryAttempt.properties;
    for (const field of ['event_type', 'status_code', 'next_retry_at'])
      expect(properties[field].deprecated, field).toBe(true);
    expect(properties.type.deprecated).toBeUndefined();
    const headers = document.paths['/v1/ext/hooks/{hook_id}/deliveries'].get.responses['200'].headers;
    expect(headers.Deprecation).toMatchObject({ required: true, example: `@${Date.UTC(2026, 11, 7) / 1000}` });
    expect(headers.Sunset).toMatchObject({ required: true, example: 'Wed, 30 Jun 2027 00:00:00 GMT' });
    expect(JSON.stringify(document)).not.toContain('x-deprecation');
  });
});
