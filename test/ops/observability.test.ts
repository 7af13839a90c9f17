import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { QUEUE_NAMES } from '../../src/contracts/jobs.js';
import { loggerOptions } from '../../src/shared/logger.js';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { EXT_ROUTES, seedResources } from '../helpers/ext-routes.js';
import { createTenant, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

let t: TestApp;
let tenant: Tenant;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
  tenant = await createTenant(t.app);
  await seedResources(t.app, tenant);
});
afterAll(async () => t?.close());

const toOpenApiPath = (url: string) => url.replace(/:([a-z_]+)/g, '{$1}');
const NON_JSON_ROUTES = /^\/(docs|metrics|admin\/queues|v1\/(ext|admin)\/openapi\.json)/;

describe('API reference', () => {
  it('is OpenAPI 3.1 with every external route, its scope and its error responses', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/v1/ext/openapi.json' });
    expect(response.statusCode).toBe(200);
    const document = response.json();
    expect(document.openapi).toBe('3.1.0');
    expect(document.components.securitySchemes.ApiKeyAuth).toEqual({ type: 'apiKey', in: 'header', name: 'x-api-key' });
    const extRoutes = t.app.routeTable.filter(
      (route) => route.url.startsWith('/v1/ext/') && !NON_JSON_ROUTES.test(route.url),
    );
    expect(extRoutes.length).toBeGreaterThanOrEqual(EXT_ROUTES.length);
    for (const route of extRoutes) {
      for (const method of [route.method].flat()) {
        if (method === 'HEAD') continue;
        const operation = document.paths[toOpenApiPath(route.url)]?.[method.toLowerCase()];
        expect(operation, `${method} ${route.url}`).toBeDefined();
        const anyScope = route.config?.anyScope as string[] | undefined;
        expect(operation.security).toEqual(
          anyScope ? anyScope.map((scope) => ({ ApiKeyAuth: [scope] })) : [{ ApiKeyAuth: [route.config?.scope] }],
        );
        expect(operation.operationId).toMatch(/^[a-z]+[A-Za-z]+$/);
        for (const status of ['401', '403', '429']) {
          expect(operation.responses[status].content['application/problem+json'].schema.$ref).toBe(
            '#/components/schemas/Problem',
          );
        }
        const success = Object.keys(operation.responses).find((status) => status.startsWith('2'))!;
        expect(operation.responses[success].headers['RateLimit-Remaining']).toBeDefined();
      }
    }
    expect(document.paths['/v1/ext/items'].get.responses['200'].headers.Link).toBeDefined();
    expect(
      document.paths['/v1/ext/items'].post.parameters.some(
        (parameter: { name: string }) => parameter.name === 'Idempotency-Key',
      ),
    ).toBe(true);
    expect(Object.keys(document.webhooks)).toEqual(
      expect.arrayContaining(['task.created', 'task.overdue', 'item.updated']),
    );
    expect(document.components.schemas.Item.additionalProperties).toBeDefined();
    expect(Object.keys(document.paths).every((path) => path.startsWith('/v1/ext/'))).toBe(true);
  });

  it('declares a response schema on every JSON route', () => {
    const missing = t.app.routeTable
      .filter((route) => !NON_JSON_ROUTES.test(route.url) && route.method !== 'HEAD')
      .filter((route) => !route.schema?.response)
      .map((route) => `${String(route.method)} ${route.url}`);
    expect(missing).toEqual([]);
  });

  it('passes redocly lint without errors (the external and the admin document)', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'openapi-'));
    const files = [];
    for (const api of ['ext', 'admin']) {
      const file = join(folder, `${api}.json`);
      writeFileSync(file, (await t.app.inject({ method: 'GET', url: `/v1/${api}/openapi.json` })).body);
      files.push(file);
    }
    const lint = spawnSync('npx', ['--no-install', 'redocly', 'lint', ...files, '--format=stylish'], {
      encoding: 'utf8',
      timeout: 90_000,
    });
    expect(lint.status, lint.stdout + lint.stderr).toBe(0);
    expect((lint.stdout + lint.stderr).match(/valid/g)?.length).toBeGreaterThanOrEqual(2);
  }, 90_000);

  it('documents the admin API in its own document, every admin route with the bearer scheme, Apache-2.0', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/v1/admin/openapi.json' });
    expect(response.statusCode).toBe(200);
    const document = response.json();
    expect(document.openapi).toBe('3.1.0');
    expect(document.info.license).toEqual({ name: 'Apache-2.0', identifier: 'Apache-2.0' });
    expect(document.components.securitySchemes.AdminToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(document.security).toEqual([{ AdminToken: [] }]);
    const adminRoutes = t.app.routeTable.filter(
      (route) => route.url.startsWith('/v1/admin/') && !NON_JSON_ROUTES.test(route.url),
    );
    expect(adminRoutes.length).toBeGreaterThanOrEqual(15);
    for (const route of adminRoutes)
      for (const method of [route.method].flat()) {
        if (method === 'HEAD') continue;
        const operation = document.paths[toOpenApiPath(route.url)]?.[method.toLowerCase()];
        expect(operation, `${method} ${route.url}`).toBeDefined();
        expect(operation.operationId).toMatch(/^[a-z]+[A-Za-z]+$/);
        expect(operation.responses['401'].content['application/problem+json']).toBeDefined();
      }
    expect(Object.keys(document.paths).every((path) => path.startsWith('/v1/admin/'))).toBe(true);
    expect(document.paths['/v1/admin/companies/{company_id}/api-keys/{key_id}'].delete).toBeDefined();
    const ext = (await t.app.inject({ method: 'GET', url: '/v1/ext/openapi.json' })).json();
    expect(ext.info.license).toEqual({ name: 'Apache-2.0', identifier: 'Apache-2.0' });
    expect(Object.keys(ext.paths).some((path) => path.startsWith('/v1/admin/'))).toBe(false);
  });

  it('is rendered at /docs, the admin document at /docs/admin', async () => {
    const page = await t.app.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    const admin = await t.app.inject({ method: 'GET', url: '/docs/admin' });
    expect(admin.statusCode).toBe(200);
    expect(admin.headers['content-type']).toMatch(/text\/html/);
    expect(admin.body).toContain('/v1/admin/openapi.json');
  });
});

describe('metrics', () => {
  it('exposes request durations by route, rate-limit rejections, queue depth and outbox backlog', async () => {
    await ext(t.app, tenant.key, 'GET', '/pipelines');
    const response = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/text\/plain/);
    const text = response.body;
    expect(text).toMatch(
      /http_request_duration_seconds_bucket\{[^}]*route="\/v1\/ext\/pipelines"[^}]*status_code="200"/,
    );
    expect(text).toContain('rate_limit_rejections_total');
    expect(text).toMatch(/queue_jobs\{queue="automations",state="waiting"\} \d+/);
    expect(text).toMatch(/queue_jobs\{queue="overdue",state="waiting"\} \d+/);
    expect(text).toMatch(/outbox_pending_documents\{collection="items"\} [1-9]/); // seeded item, no publisher here
    expect(text).toContain('webhook_deliveries_total');
    expect(text).toContain('overdue_scan_duration_seconds');
  });

  it('reports the heap and the RSS left after the latest full garbage collection (what a leak raises)', async () => {
    // A full collection on demand: gc is exposed to a fresh context once the flag is set.
    setFlagsFromString('--expose-gc');
    const collect = runInNewContext('gc') as () => void;
    collect();
    const reported = async () => {
      const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
      return Number(/^nodejs_heap_used_after_full_gc_bytes (\d+)$/m.exec(text)?.[1] ?? 0);
    };
    await waitFor(async () => (await reported()) > 0); // the observer runs just after the collection
    const heap = await reported();
    expect(heap).toBeGreaterThan(1024 * 1024);
    expect(heap).toBeLessThan(process.memoryUsage().heapTotal * 2);
    const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    const rss = Number(/^process_resident_memory_after_full_gc_bytes (\d+)$/m.exec(text)?.[1] ?? 0);
    expect(rss).toBeGreaterThan(heap);
    expect(rss).toBeLessThan(process.memoryUsage.rss() * 2);
  });
});

describe('queue dashboard', () => {
  it('is behind ADMIN_TOKEN (bearer or basic) at /admin/queues', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/admin/queues' })).statusCode).toBe(401);
    const basic = Buffer.from(`ops:${TEST_ADMIN_TOKEN}`).toString('base64');
    const page = await t.app.inject({
      method: 'GET',
      url: '/admin/queues',
      headers: { authorization: `Basic ${basic}` },
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<html');
    const api = await t.app.inject({
      method: 'GET',
      url: '/admin/queues/api/queues',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    expect(api.statusCode).toBe(200);
    const names = api.json<{ queues: Array<{ name: string }> }>().queues.map((queue) => queue.name);
    expect(names.sort()).toEqual([...QUEUE_NAMES].sort());
  });
});

describe('request logs', () => {
  it('write one JSON line per request with ids, route, status and duration, never the key', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    // The production logger's options (redaction included), writing to the sink.
    const app = await buildApp({
      config: t.config,
      db: t.db,
      redis: t.redis,
      logger: pino(loggerOptions('info'), sink),
    });
    try {
      await ext(app, tenant.key, 'GET', `/items/${tenant.itemId}`, undefined, { 'x-request-id': 'trace-me-1' });
      const requestLines = lines.map((line) => JSON.parse(line)).filter((entry) => entry.reqId === 'trace-me-1');
      expect(requestLines).toHaveLength(1);
      expect(requestLines[0]).toMatchObject({
        msg: 'request',
        route: '/v1/ext/items/:item_id',
        status: 200,
        company_id: tenant.companyId,
        key_id: tenant.keyId,
        duration_ms: expect.any(Number),
      });
      expect(lines.join('\n')).not.toContain(tenant.key);
      // The request line skips redaction (its fields hold no secret); everything else logged keeps it.
      app.log.info({ api_key: { key: 'sk_live_not_for_logs' } }, 'other');
      const other = lines.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'other');
      expect(other?.api_key).toEqual({ key: '[redacted]' });
    } finally {
      await app.close();
    }
  });
});
