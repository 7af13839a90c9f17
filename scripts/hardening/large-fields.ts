// `npx tsx scripts/hardening/large-fields.ts [items] [rounds] [clients]`: the large-field probe of issue 59
// (item 1) against a real web process (the compiled tree, a child process on loopback, with the
// stand-in MongoDB or MONGO_URL, and a private Redis). A pipeline with 100 text fields, `items` items
// (default 40) whose 100 values are 10,000 characters (1 MB each), each updated twice in all 100 fields
// (item.updated events that carried ~3 MB each before the envelope cap). Then `clients` (default 1)
// clients page `rounds` times (default 3) through `GET /v1/ext/events?type=item.updated&limit=200`,
// `...&limit=100` and `GET /v1/ext/items?limit=200`, while /healthz is asked every 100 ms and the web
// process's VmRSS is read every 50 ms. Prints the web process's idle RSS, its peak RSS during the
// probe, the slowest /healthz and what each list answered.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { must } from '../../src/shared/must.js';
import { SoakStack, type ManagedProcess } from '../soak/stack.js';

const ITEMS = Number(process.argv[2] ?? 40);
const ROUNDS = Number(process.argv[3] ?? 3);
const CLIENTS = Number(process.argv[4] ?? 1);
const FIELDS = 100;
const VALUE_LENGTH = 10_000;
const MiB = 1024 * 1024;

/** The process's resident set size in bytes (Linux /proc). */
function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(must(match?.[1], 'VmRSS in /proc/<pid>/status')) * 1024;
}

/** The V8 heap in use, from the web process's own /metrics (prom-client's default metrics). */
async function heapUsedOf(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? NaN);
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function call(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
  return { text, headers: response.headers };
}

/** A company, its user, an API key and a pipeline of 100 text fields, through the admin API. */
async function seedTenant(base: string, adminToken: string) {
  const asAdmin = { authorization: `Bearer ${adminToken}` };
  const json = async (path: string, body: unknown) => JSON.parse((await call(base, 'POST', path, asAdmin, body)).text);
  const company = await json('/v1/admin/companies', { name: 'Large fields' });
  const user = await json(`/v1/admin/companies/${company.company_id}/users`, { name: 'A', email: 'a@example.com' });
  const key = await json(`/v1/admin/companies/${company.company_id}/api-keys`, {
    name: 'probe',
    created_by: user.user_id,
  });
  const pipeline = await json(`/v1/admin/companies/${company.company_id}/pipelines`, {
    name: 'Wide',
    stages: [{ name: 'Lead' }],
    fields: Array.from({ length: FIELDS }, (_, i) => ({ name: `f${i}`, type: 'text' })),
  });
  return { key: key.key as string, pipelineId: pipeline.pipeline_id as string, stageId: pipeline.stages[0].stage_id };
}

const values = (fill: string) =>
  Object.fromEntries(Array.from({ length: FIELDS }, (_, i) => [`f${i}`, fill.repeat(VALUE_LENGTH)]));

interface ListOutcome {
  pages: number;
  rows: number;
  largestBody: number;
  slowestMs: number;
}

/** Pages through `path` to the end, following x-next-cursor. */
async function pageThrough(base: string, key: string, path: string): Promise<ListOutcome> {
  const outcome: ListOutcome = { pages: 0, rows: 0, largestBody: 0, slowestMs: 0 };
  let cursor: string | null = null;
  do {
    const started = performance.now();
    const url: string = cursor ? `${path}&cursor=${encodeURIComponent(cursor)}` : path;
    const { text, headers } = await call(base, 'GET', url, { 'x-api-key': key });
    outcome.slowestMs = Math.max(outcome.slowestMs, performance.now() - started);
    outcome.pages++;
    outcome.rows += (JSON.parse(text) as unknown[]).length;
    outcome.largestBody = Math.max(outcome.largestBody, Buffer.byteLength(text));
    cursor = headers.get('x-next-cursor');
  } while (cursor);
  return outcome;
}

const stack = new SoakStack();
let web: ManagedProcess | undefined;
try {
  await stack.startInfrastructure();
  web = await stack.startWeb('web');
  const base = `http://127.0.0.1:${web.port}`;
  const pid = must(web.child.pid, 'the web process id');
  await sleep(2_000);
  const idleAtStart = rssOf(pid);
  const heapAtStart = await heapUsedOf(base);

  const tenant = await seedTenant(base, stack.adminToken);
  const auth = { 'x-api-key': tenant.key };
  for (let i = 0; i < ITEMS; i++) {
    const item = JSON.parse(
      (
        await call(base, 'POST', '/v1/ext/items', auth, {
          name: `Wide ${i}`,
          pipeline_id: tenant.pipelineId,
          stage_id: tenant.stageId,
          metadata: values('a'),
        })
      ).text,
    );
    await call(base, 'PATCH', `/v1/ext/items/${item.item_id}`, auth, { metadata: values('b') });
    await call(base, 'PATCH', `/v1/ext/items/${item.item_id}`, auth, { metadata: values('c') });
  }
  await sleep(3_000);
  const idle = rssOf(pid);
  const heapIdle = await heapUsedOf(base);

  // The probe, with RSS and /healthz watched throughout.
  let probing = true;
  let peak = idle;
  let slowestHealthz = 0;
  let healthzCount = 0;
  const sampler = (async () => {
    while (probing) {
      peak = Math.max(peak, rssOf(pid));
      await sleep(50);
    }
  })();
  const pinger = (async () => {
    while (probing) {
      const started = performance.now();
      await call(base, 'GET', '/healthz', {});
      slowestHealthz = Math.max(slowestHealthz, performance.now() - started);
      healthzCount++;
      await sleep(100);
    }
  })();
  const lists = [
    '/v1/ext/events?type=item.updated&limit=200',
    '/v1/ext/events?type=item.updated&limit=100',
    '/v1/ext/items?limit=200',
  ];
  const outcomes = new Map<string, ListOutcome>();
  const probeStarted = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        for (const path of lists) {
          const outcome = await pageThrough(base, tenant.key, path);
          const seen = outcomes.get(path);
          outcomes.set(path, {
            pages: outcome.pages,
            rows: outcome.rows,
            largestBody: Math.max(seen?.largestBody ?? 0, outcome.largestBody),
            slowestMs: Math.max(seen?.slowestMs ?? 0, outcome.slowestMs),
          });
        }
      }
    }),
  );
  const probeMs = performance.now() - probeStarted;
  probing = false;
  await Promise.all([sampler, pinger]);
  const heapAfter = await heapUsedOf(base);

  console.log(
    `\nlarge-field probe: ${ITEMS} items x ${FIELDS} text fields x ${VALUE_LENGTH} chars, ${ITEMS * 2} item.updated events; ` +
      `${CLIENTS} client(s) x ${ROUNDS} round(s), ${(probeMs / 1000).toFixed(1)} s`,
  );
  console.table(
    [...outcomes].map(([path, outcome]) => ({
      list: path,
      pages: outcome.pages,
      rows: outcome.rows,
      'largest body': mib(outcome.largestBody),
      'slowest page ms': Math.round(outcome.slowestMs),
    })),
  );
  console.table({
    'web RSS at start (idle)': mib(idleAtStart),
    'web RSS after seeding (idle, the baseline)': mib(idle),
    'web RSS peak during the probe': mib(peak),
    'peak minus baseline': mib(peak - idle),
    'slowest /healthz during the probe': `${Math.round(slowestHealthz)} ms (${healthzCount} asked)`,
    'V8 heap used: start / after seeding / after the probe': `${mib(heapAtStart)} / ${mib(heapIdle)} / ${mib(heapAfter)}`,
  });
} finally {
  await stack.stopAll();
}
