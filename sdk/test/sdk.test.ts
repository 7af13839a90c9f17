import { execFile, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { must } from '../../src/shared/must.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../../test/helpers/app.js';
import { createTenant, type Tenant } from '../../test/helpers/fixtures.js';
import { waitFor } from '../../test/helpers/wait.js';
import { Receiver } from '../../test/hooks/receiver.js';
import { GENERATED_TYPES, typesOf } from '../scripts/generate.js';
import {
  ApiError,
  createClient,
  fileCursorStore,
  ok,
  verifyWebhook,
  WebhookVerificationError,
  type FeedEvent,
  type PipelineRecordsClient,
  type ProblemCode,
} from '../src/index.js';

const root = join(import.meta.dirname, '../..');
const execFileAsync = promisify(execFile);

// The SDK against a real service: the web app on a port, the relay and hooks workers, real MongoDB and Redis.
let t: TestApp;
let tenant: Tenant;
let baseUrl: string;
let api: PipelineRecordsClient;
let workers: { close(): Promise<void> };
let dir: string;
let examplesDir: string;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' }, { publisher: true });
  workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks']);
  tenant = await createTenant(t.app);
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  api = createClient({ baseUrl, apiKey: tenant.key });
  dir = mkdtempSync(join(tmpdir(), 'sdk-test-'));
  // Beside sdk/src, so the examples import it by a relative path as the package's own files do.
  examplesDir = mkdtempSync(join(root, 'sdk', '.readme-check-'));
});
afterAll(async () => {
  await workers?.close();
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (examplesDir) rmSync(examplesDir, { recursive: true, force: true });
});

/**
 * sdk/ compiled with its own tsconfig (as `npm run sdk:build` does) into a package folder, once per file,
 * with sdk/README.md's examples in the same program: each imports the SDK as an integrator would, and
 * the names it takes as given are declared.
 */
let compilation: { status: number | null; diagnostics: string; packageDir: string; examples: number } | undefined;
function compileSdk() {
  if (compilation) return compilation;
  const packageDir = join(dir, 'node_modules', '@pipeline-records', 'sdk');
  mkdirSync(packageDir, { recursive: true });
  const given = `import type { PipelineRecordsClient } from '../src/index.js';
declare const pipeline_id: string, baseUrl: string, apiKey: string, rawBody: Buffer;
declare const req: import('node:http').IncomingMessage;
declare function applyToMyCopy(event: unknown): Promise<void>;
`;
  const examples = [...readFileSync(join(root, 'sdk/README.md'), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)];
  examples.forEach((example, index) => {
    const code = example[1]!.replaceAll("'@pipeline-records/sdk'", "'../src/index.js'");
    const api = /const api\b/.test(code) ? '' : 'declare const api: PipelineRecordsClient;\n';
    writeFileSync(join(examplesDir, `example-${index}.ts`), `${given}${api}${code}\nexport {};\n`);
  });
  writeFileSync(
    join(examplesDir, 'tsconfig.json'),
    JSON.stringify({
      extends: '../tsconfig.json',
      compilerOptions: { rootDir: '..', outDir: join(packageDir, 'dist') },
      include: ['../src', './*.ts'],
    }),
  );
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', join(examplesDir, 'tsconfig.json')], { encoding: 'utf8' });
  compilation = { status: run.status, diagnostics: run.stdout + run.stderr, packageDir, examples: examples.length };
  return compilation;
}

const newItem = (name: string, metadata: Record<string, unknown> = {}) => ({
  name,
  pipeline_id: tenant.pipelineId,
  stage_id: tenant.stageIds[0]!,
  metadata,
});

describe('the SDK', () => {
  it('is typed from the document the service serves now (the generated file is current)', async () => {
    const served = (await t.app.inject({ method: 'GET', url: '/v1/ext/openapi.json' })).body;
    let onDisk = '';
    try {
      onDisk = readFileSync(GENERATED_TYPES, 'utf8');
    } catch {
      throw new Error('sdk/src/generated/api.ts is missing: npm run sdk:generate (npm test runs it first)');
    }
    expect(onDisk, 'stale SDK types: npm run sdk:generate').toBe(await typesOf(served));
  });

  it('builds into a package Node imports by its name, which talks to the service', async () => {
    // What an integrator installs: sdk/ compiled with its own tsconfig, imported through package.json's exports.
    const { status, diagnostics, packageDir } = compileSdk();
    expect(status, diagnostics).toBe(0);
    copyFileSync(join(root, 'sdk/package.json'), join(packageDir, 'package.json'));
    symlinkSync(join(root, 'node_modules', 'openapi-fetch'), join(dir, 'node_modules', 'openapi-fetch'), 'dir');
    writeFileSync(
      join(dir, 'integrator.mjs'),
      `import { createClient, ok } from '@pipeline-records/sdk';
const api = createClient({ baseUrl: process.argv[2], apiKey: process.argv[3] });
const pipelines = ok(await api.GET('/v1/ext/pipelines'));
console.log(JSON.stringify(pipelines.map((pipeline) => pipeline.pipeline_id)));`,
    );
    // Not spawnSync: the service answering it runs in this process.
    const run = await execFileAsync(process.execPath, [join(dir, 'integrator.mjs'), baseUrl, tenant.key], {
      timeout: 30_000,
    });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual([tenant.pipelineId]);
  }, 60_000);

  it("type-checks the README's examples against the SDK (in the same compile)", () => {
    const { diagnostics, examples } = compileSdk();
    expect(examples).toBeGreaterThanOrEqual(4);
    expect(diagnostics).toBe('');
  }, 60_000);

  it('makes typed calls; a refusal is an ApiError whose code is one of the documented codes', async () => {
    const item = ok(await api.POST('/v1/ext/items', { body: newItem('Acme renewal', { deal_value: 12_000 }) }));
    expect(item).toMatchObject({ name: 'Acme renewal', deal_value: 12_000, version: 1 });
    const read = ok(await api.GET('/v1/ext/items/{item_id}', { params: { path: { item_id: item.item_id } } }));
    expect(read.item_id).toBe(item.item_id);

    // @ts-expect-error a task needs a title: the generated body type says so before the service does
    const refused = await api.POST('/v1/ext/tasks', { body: { due_at: '2030-01-01T10:00:00Z' } });
    expect(refused.response.status).toBe(400);
    const code: ProblemCode | undefined = refused.error?.code;
    expect(code).toBe('validation_failed');
    expect(refused.error?.errors).toEqual([{ path: 'title', message: expect.stringMatching(/^required/) }]);
    try {
      ok(refused);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).code).toBe('validation_failed');
      expect((error as ApiError).status).toBe(400);
    }
  });

  it('sends an Idempotency-Key with every POST, so a retry after a lost answer creates nothing twice', async () => {
    const sent: Array<{ key: string | null; replayed: string | null }> = [];
    let lose = true;
    const flaky = createClient({
      baseUrl,
      apiKey: tenant.key,
      retry: { retries: 2 },
      // The network loses the first answer after the service acted on the request.
      fetch: async (request) => {
        const response = await fetch(request);
        sent.push({
          key: request.headers.get('idempotency-key'),
          replayed: response.headers.get('idempotent-replayed'),
        });
        if (lose) {
          lose = false;
          throw new TypeError('fetch failed: socket hang up');
        }
        return response;
      },
    });
    const task = ok(
      await flaky.POST('/v1/ext/tasks', { body: { title: 'Exactly once', due_at: '2030-01-01T10:00:00Z' } }),
    );
    expect(sent).toHaveLength(2);
    expect(sent[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[1]).toEqual({ key: sent[0]!.key, replayed: 'true' });
    const named = [];
    for await (const each of api.list('/v1/ext/tasks', { params: { query: { limit: 200 } } }))
      if (each.title === 'Exactly once') named.push(each.task_id);
    expect(named).toEqual([task.task_id]);
  });

  it('iterates every record of a list across pages, and filters by custom fields in the typed query', async () => {
    const names = ['Paged 1', 'Paged 2', 'Paged 3', 'Paged 4', 'Paged 5'];
    for (const [index, name] of names.entries())
      ok(await api.POST('/v1/ext/items', { body: newItem(name, { deal_value: index * 10_000 }) }));
    const pages = [];
    for await (const page of api.pages('/v1/ext/items', { params: { query: { limit: 2, sort: '-created_at' } } }))
      pages.push(page.records.map((record) => record.name));
    expect(pages.slice(0, 3)).toEqual([
      ['Paged 5', 'Paged 4'],
      ['Paged 3', 'Paged 2'],
      ['Paged 1', 'Acme renewal'],
    ]);
    const big = [];
    for await (const item of api.list('/v1/ext/items', {
      params: {
        query: { pipeline_id: tenant.pipelineId, limit: 1, metadata: { 'metadata.deal_value[gte]': '30000' } },
      },
    }))
      big.push(item.name);
    expect(big.sort()).toEqual(['Paged 4', 'Paged 5']);
  });

  it('tails the feed from a stored cursor: a stop and a restart neither skip nor repeat an event', async () => {
    const store = fileCursorStore(join(dir, 'feed', 'cursor'));
    const stop = new AbortController();
    const filter = { type: 'task.created' };
    const first: FeedEvent[] = [];
    const tailer = createClient({ baseUrl, apiKey: tenant.key });
    // Start at the end of the feed: everything before this test is consumed without being looked at.
    for await (const page of tailer.pages('/v1/ext/events', { params: { query: { ...filter, limit: 200 } } }))
      if (page.nextCursor) await store.save(page.nextCursor);
    const consumed = (async () => {
      for await (const event of tailer.tailEvents({ store, wait: 5, filter, signal: stop.signal })) {
        first.push(event);
        if (first.length === 3) stop.abort();
      }
    })();
    // Written while the tailer waits: the waiting request answers as they become readable.
    for (const title of ['Tail 1', 'Tail 2', 'Tail 3'])
      ok(await api.POST('/v1/ext/tasks', { body: { title, due_at: '2030-01-01T10:00:00Z' } }));
    await consumed;
    expect(first.map((event) => (event.data as { title: string }).title)).toEqual(['Tail 1', 'Tail 2', 'Tail 3']);
    expect(await store.load()).toEqual(expect.any(String));

    // The process is gone; the next one starts from the stored cursor with a new client.
    for (const title of ['Tail 4', 'Tail 5'])
      ok(await api.POST('/v1/ext/tasks', { body: { title, due_at: '2030-01-01T10:00:00Z' } }));
    const again = new AbortController();
    const second: FeedEvent[] = [];
    for await (const event of createClient({ baseUrl, apiKey: tenant.key }).tailEvents({
      store: fileCursorStore(join(dir, 'feed', 'cursor')),
      wait: 5,
      filter,
      signal: again.signal,
    })) {
      second.push(event);
      if (second.length === 2) again.abort();
    }
    expect(second.map((event) => (event.data as { title: string }).title)).toEqual(['Tail 4', 'Tail 5']);
    expect(second[0]!.sequence).toBeGreaterThan(first[2]!.sequence);
  });

  it('tails through a network outage: the tailer waits, tries again, and misses nothing', async () => {
    // The first four requests to the feed find no network: the first call's three attempts (the client retries twice
    // itself) fail, so the tailer waits and calls again; that call's first attempt fails too, and its retry gets through.
    let down = 4;
    const retries: number[] = [];
    const flaky = createClient({
      baseUrl,
      apiKey: tenant.key,
      fetch: async (request) => {
        if (new URL(request.url).pathname === '/v1/ext/events' && down-- > 0) throw new TypeError('fetch failed');
        return fetch(request);
      },
    });
    ok(await api.POST('/v1/ext/tasks', { body: { title: 'Through the outage', due_at: '2030-01-01T10:00:00Z' } }));
    const stop = new AbortController();
    const seen: string[] = [];
    for await (const event of flaky.tailEvents({
      wait: 1,
      filter: { type: 'task.created' },
      signal: stop.signal,
      onRetry: (_error, delayMs) => retries.push(delayMs),
    })) {
      seen.push((event.data as { title: string }).title);
      if (seen.includes('Through the outage')) stop.abort();
    }
    expect(retries).toEqual([500]);
    expect(down).toBeLessThan(0);
    expect(seen.filter((title) => title === 'Through the outage')).toHaveLength(1);
  });

  it('verifies a real webhook with the secret kept from the subscription, and refuses a tampered one', async () => {
    const receiver = await Receiver.start();
    try {
      const hook = ok(
        await api.POST('/v1/ext/hooks', { body: { target_url: receiver.url(), events: ['task.created'] } }),
      );
      expect(hook.secret).toMatch(/^whsec_/);
      const task = ok(await api.POST('/v1/ext/tasks', { body: { title: 'Signed', due_at: '2030-01-01T10:00:00Z' } }));
      const delivery = must(
        await waitFor(() => receiver.requests.find((request) => request.body.includes(task.task_id))),
        'the delivery',
      );
      const event = verifyWebhook({ secret: hook.secret, headers: delivery.headers, body: delivery.body });
      expect(event).toMatchObject({ type: 'task.created', data: { task_id: task.task_id } });

      const tampered = () =>
        verifyWebhook({
          secret: hook.secret,
          headers: delivery.headers,
          body: delivery.body.replace('Signed', 'Forged'),
        });
      expect(tampered).toThrow(WebhookVerificationError);
      expect(() =>
        verifyWebhook({
          secret: hook.secret,
          headers: delivery.headers,
          body: delivery.body,
          now: new Date(Date.now() + 600_000),
        }),
      ).toThrow(expect.objectContaining({ reason: 'timestamp_too_old' }));
      expect(() =>
        verifyWebhook({
          secret: 'whsec_' + Buffer.alloc(24).toString('base64'),
          headers: delivery.headers,
          body: delivery.body,
        }),
      ).toThrow(expect.objectContaining({ reason: 'no_matching_signature' }));
    } finally {
      await receiver.close();
    }
  });
});
