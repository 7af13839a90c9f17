import { randomUUID } from 'node:crypto';
import { must } from '../../src/shared/must.js';
import { compare, type LoadTarget } from '../load.js';
import { countRedisTrips } from '../redis-trips.js';
import { comparisonRow, int, type Row } from '../report.js';
import { compareSettings, json, type BenchContext } from './context.js';

/**
 * The hello-world rows are information: the one Redis round trip of the rate limit already costs a bare
 * route about half its throughput; the overhead is judged against the conventional stack
 * (scenarios/conventional.ts).
 */
const INFORMATION = undefined;

function lowest(values: Array<number | undefined>): number | undefined {
  const known = values.filter((value): value is number => value !== undefined);
  return known.length === 0 ? undefined : Math.min(...known);
}

/** Sequential requests (one at a time), insisting on the expected status. */
async function sequentially(
  count: number,
  expected: number,
  send: (index: number) => Promise<Response>,
): Promise<void> {
  for (let index = 0; index < count; index++) {
    const response = await send(index);
    await response.arrayBuffer();
    if (response.status !== expected)
      throw new Error(`expected ${expected}, got ${response.status} from ${response.url}`);
  }
}

async function redisTripRows(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const tenant = seeded.crud;
  const headers = { 'x-api-key': tenant.key, ...json };
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${stack.web.url}/v1/ext${path}`, {
      ...init,
      headers: { ...headers, ...(init.headers as Record<string, string>) },
    });
  const duplicateProbe = JSON.stringify({ pipeline_id: tenant.pipelineId, name: 'Deal 1' });
  const task = JSON.stringify({ title: 'Round trip probe', due_at: '2031-01-15T09:30:00Z' });
  const cases: Array<{
    label: string;
    status: number;
    send: (index: number) => Promise<Response>;
    max: number;
    target: string;
  }> = [
    {
      label: 'GET /pipelines/{id}',
      status: 200,
      send: () => api(`/pipelines/${tenant.pipelineId}`),
      max: 1,
      target: '1 (rate limit)',
    },
    {
      label: 'POST /items/check-duplicates',
      status: 200,
      send: () => api('/items/check-duplicates', { method: 'POST', body: duplicateProbe }),
      max: 1,
      target: '1 (rate limit)',
    },
    {
      label: 'POST /items/check-duplicates + Idempotency-Key',
      status: 200,
      send: () =>
        api('/items/check-duplicates', {
          method: 'POST',
          body: duplicateProbe,
          headers: { 'idempotency-key': randomUUID() },
        }),
      max: 2,
      target: '≤ 2 (record is in MongoDB: expect 1)',
    },
    {
      label: 'POST /tasks + Idempotency-Key',
      status: 201,
      send: () => api('/tasks', { method: 'POST', body: task, headers: { 'idempotency-key': randomUUID() } }),
      max: 2,
      target: '≤ 2: 1 + the event publish (both queues in one round trip)',
    },
  ];
  const rows: Row[] = [];
  for (const probe of cases) {
    await sequentially(20, probe.status, probe.send); // warm-up: scripts loaded, caches filled
    // Without the memory sampler's /metrics scrapes, whose queue gauges are Redis commands of the web process too.
    const count = await context.sampler.withoutScrapes(() =>
      countRedisTrips(stack.redisUrl, stack.web.child.pid!, options.redisTripRequests, () =>
        sequentially(options.redisTripRequests, probe.status, probe.send),
      ),
    );
    const breakdown = [...count.commands].map(([name, perRequest]) => `${name} ${perRequest.toFixed(2)}`).join(', ');
    rows.push({
      scenario: `Redis round trips per request: ${probe.label}`,
      value: `${count.tripsPerRequest.toFixed(2)} trips (${breakdown})`,
      target: probe.target,
      pass: count.tripsPerRequest <= probe.max + 0.01,
    });
  }
  must(rows.at(-1), 'a Redis round-trip row').note =
    `Counted with MONITOR over ${int(options.redisTripRequests)} sequential requests, keeping only the web process's own connections; a MULTI…EXEC block is one round trip, commands inside Lua scripts are not counted.`;
  return rows;
}

export async function runOverheadScenarios(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const settings = compareSettings(options);
  const tenant = seeded.crud;
  const pipelineRoute = (): LoadTarget => ({
    url: stack.web.url,
    server: 'web',
    headers: { 'x-api-key': tenant.key },
    requests: [{ path: `/v1/ext/pipelines/${tenant.pipelineId}` }],
  });
  const bare = (path: string) => (): LoadTarget => ({
    url: stack.baseline.url,
    server: 'baseline',
    requests: [{ path }],
  });
  const rows: Row[] = [];

  console.log('Per-request overhead');
  const overhead = await compare('GET /v1/ext/pipelines/{id} vs hello-world', pipelineRoute, bare('/hello'), settings);
  rows.push(
    comparisonRow(
      'fixed overhead: GET /v1/ext/pipelines/{id} vs bare hello-world',
      overhead,
      INFORMATION,
      'Our cheapest route, a trivial one: auth (cached key), rate limit (1 Redis trip), scope check, params validation, the pipeline from the process cache (no database I/O), response serialization, request log and metrics. The baseline does no I/O at all.',
    ),
  );
  const limiterOnly = await compare(
    'bare hello-world + rate-limit script vs hello-world',
    bare('/hello-ratelimit'),
    bare('/hello'),
    settings,
  );
  rows.push(
    comparisonRow(
      'reference: bare hello-world + the rate-limit Lua call',
      limiterOnly,
      INFORMATION,
      'What the one Redis round trip of the rate limit alone costs a bare route: the part of the overhead that no implementation can avoid.',
    ),
  );

  // The same ratio from the serving process's CPU time per request, which other load on the machine
  // disturbs far less than requests per second. The hello-world was measured twice; the lower figure
  // is taken: other work on the machine only ever inflates it.
  const helloMs = lowest([overhead.baseline.serverCpuMs, limiterOnly.baseline.serverCpuMs]);
  const oursMs = overhead.ours.serverCpuMs;
  if (helloMs !== undefined && oursMs !== undefined) {
    const ratio = helloMs / oursMs;
    rows.push({
      scenario: 'fixed overhead by CPU time per request (same route vs hello-world)',
      value: `${oursMs.toFixed(3)} ms CPU per request`,
      baseline: `hello-world ${helloMs.toFixed(3)} ms CPU per request`,
      ratio,
      note: 'ratio = hello-world CPU / our CPU per request: the share of its throughput a CPU-bound hello-world would keep with our per-request pipeline in front of it.',
    });
  }
  rows.push(...(await redisTripRows(context)));
  return rows;
}
