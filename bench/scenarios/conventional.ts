// Ours against what a user would build instead (bench/conventional-server.ts): the same routes from
// stock parts. Target per route: at least 0.95× its throughput and at most 1.05× its CPU per request, in the
// same run (the margins: what one run's ratios move by here, not a cost we accept).
import { must } from '../../src/shared/must.js';
import { compare, type Comparison, type LoadTarget } from '../load.js';
import { comparisonRow, cpuRatio, cpuRatiosText, int, type Row } from '../report.js';
import { atOnceSettings, cpuComparisonRate, inTurnsSettings, json, type BenchContext } from './context.js';
import { versionedPatches } from './crud.js';

const MIN_RATIO = 0.95;
const MAX_CPU_RATIO = 1.05;
/** Runs of each CPU comparison at once (unless --runs asks for more), as for tracing: 16 s more per route. */
const CPU_RUNS = 5;

/** The comparison row, judged on throughput (at saturation, in short turns: inTurnsSettings) and on CPU per request (at a fixed rate, at once). */
function conventionalRow(scenario: string, throughput: Comparison, cpu: Comparison, rate: number, note: string): Row {
  const row = comparisonRow(scenario, throughput, MIN_RATIO, note);
  const ours = cpu.ours.serverCpuMs;
  const theirs = cpu.baseline.serverCpuMs;
  const ratio = cpuRatio(cpu);
  const cpuOk = ratio !== undefined && ratio <= MAX_CPU_RATIO && cpu.ours.failures + cpu.baseline.failures === 0;
  return {
    ...row,
    target: `ratio ≥ ${MIN_RATIO} and CPU/request ≤ ${MAX_CPU_RATIO}× its`,
    value: `${row.value} (CPU ${ours?.toFixed(3) ?? '?'} vs ${theirs?.toFixed(3) ?? '?'} ms/req, ${ratio?.toFixed(3) ?? '?'}×)`,
    pass: row.pass === true && cpuOk,
    note: `${row.note ?? ''} CPU per request judged with both loaded at once at ${int(rate)} req/s each: ours / conventional by run (or by pair of runs, swapped between cores) ${cpuRatiosText(cpu)}.`,
  };
}

export async function runConventionalScenarios(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const settings = inTurnsSettings(options);
  const tenant = seeded.crud;
  console.log('Against the conventional stack (bench/conventional-server.ts)');
  const conventional = await stack.startBenchServer('conventional', 'bench/conventional-server.ts', '/healthz');
  // Ours as it runs by default too: LOG_LEVEL=info, one log line per request (the conventional
  // server's default logger writes two); the other scenarios' web process logs warnings only.
  const web = await stack.startExtraWeb('web-info', { LOG_LEVEL: 'info' });
  type Load = Omit<LoadTarget, 'url' | 'server' | 'headers'>;
  const target =
    (url: string, server: string) =>
    async (load: Load | Promise<Load>): Promise<LoadTarget> => ({
      url,
      server,
      headers: { 'x-api-key': tenant.key, ...json },
      ...(await load),
    });
  const ours = target(web.url, 'web-info');
  const theirs = target(conventional.url, 'conventional');
  /** Cycles through the seeded items, one per request, so no single document is hot. */
  const rotatingItems = () => {
    let next = 0;
    return [
      {
        setupRequest: (request: object) => ({
          ...request,
          path: `/v1/ext/items/${must(seeded.itemIds[next++ % seeded.itemIds.length], 'a seeded id')}`,
        }),
      },
    ];
  };
  // Each side PATCHes its own half of the seeded items: loaded at once, they would otherwise meet on an item
  // and one would answer 409.
  const half = Math.floor(seeded.itemIds.length / 2);
  const patchedBy = { ours: seeded.itemIds.slice(0, half), theirs: seeded.itemIds.slice(half) };
  const patches = async (ids: string[]): Promise<Load> => ({
    method: 'PATCH',
    requests: await versionedPatches(
      context,
      (id) => `/v1/ext/items/${id}`,
      (doc) => doc.item_id as string,
      ids,
    ),
  });
  const taskBody = JSON.stringify({ title: 'Call back about the renewal', due_at: '2031-01-15T09:30:00Z' });
  const task: Load = {
    method: 'POST',
    body: taskBody,
    requests: [{ method: 'POST', path: '/v1/ext/tasks', body: taskBody }],
  };
  const routes: Array<{ scenario: string; load: (side: 'ours' | 'theirs') => Load | Promise<Load>; note: string }> = [
    {
      scenario: 'vs conventional: GET /v1/ext/pipelines/{id} (fixed overhead)',
      load: () => ({ requests: [{ path: `/v1/ext/pipelines/${tenant.pipelineId}` }] }),
      note: 'Conventional: auth from an in-process map, @fastify/rate-limit (Redis store), zod params and response validation, default logger; the pipeline from an in-process map (ours: the announced cache), no MongoDB I/O on either side.',
    },
    {
      scenario: 'vs conventional: GET /v1/ext/items/{id}',
      load: () => ({ requests: rotatingItems() }),
      note: 'Both: one findOne of the item, its pipeline from memory, the response validated and serialized.',
    },
    {
      scenario: 'vs conventional: POST /v1/ext/tasks',
      load: () => task,
      note: "Conventional: zod body validation, an insertOne of the task and one of its event record, then a BullMQ Queue.add of the event, per request. Ours: one insertOne with the event in the task's outbox; after the response the events of each 25 ms are recorded in `events`, published to both event queues (one Redis round trip) and cleared together; ours also sends an ETag.",
    },
    {
      scenario: 'vs conventional: PATCH /v1/ext/items/{id} with version',
      load: (side) => patches(patchedBy[side]),
      note: "A rename with the item's current version, each side over its own half of the seeded items. Conventional: zod body validation, a findOne of the item (its pipeline judges the change; its values are the event's changes), a findOneAndUpdate with the version in its filter, then an insertOne of the item.updated event record and a BullMQ Queue.add, per request. Ours: the same conditional findOneAndUpdate carrying the event in the item's outbox (the read is skipped when this process last saw the item at that version), the event recorded, published and cleared after the response, shared by the writes of each 25 ms.",
    },
  ];
  const rows: Row[] = [];
  for (const route of routes.filter(({ scenario }) => !options.route || scenario.includes(options.route))) {
    const throughput = await compare(
      route.scenario,
      () => ours(route.load('ours')),
      () => theirs(route.load('theirs')),
      settings,
    );
    const rate = cpuComparisonRate(Math.min(throughput.ours.rps, throughput.baseline.rps));
    const cpu = await compare(
      `${route.scenario}, CPU at ${rate} req/s each, at once`,
      () => ours(route.load('ours')),
      () => theirs(route.load('theirs')),
      // One run's ratio moves by about ±0.1 here.
      atOnceSettings(options, rate, CPU_RUNS),
    );
    rows.push(conventionalRow(route.scenario, throughput, cpu, rate, route.note));
  }
  await Promise.all([stack.children.stop(conventional.child), stack.children.stop(web.child)]);
  return rows;
}
