import { fire, type LoadTarget } from '../load.js';
import { int, ms, type Row } from '../report.js';
import { memoryGaugesOf, rssOf } from '../rss.js';
import { createTenant, insertItems, type Tenant } from '../seed.js';
import { json, type BenchContext } from './context.js';
import type { Stack } from '../stack.js';

/** Memory flat: the export's web RSS may grow by at most this much over its idle RSS, whatever the export's size. */
const EXPORT_RSS_BUDGET_MB = 50;
const HISTORY_CHANGES = 1_000;
const HISTORY_P99_TARGET_MS = 100;

const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

/**
 * Export (docs/export.md): every item of a company of `count` items streamed as NDJSON through HTTP, read as fast as
 * this client takes it. Records/s, and the web process's RSS sampled every 100 ms against its idle RSS just before.
 */
async function exportRows(context: BenchContext): Promise<Row[]> {
  const { stack, options } = context;
  const count = options.exportItems;
  const tenant = await createTenant(stack, 'Bench Export Co');
  await insertItems(stack, tenant, count);
  const pid = stack.web.child.pid!;
  await sleep(1_000);
  const idle = (await rssOf(pid)) ?? Number.NaN;
  let peak = idle;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, (await rssOf(pid)) ?? 0);
      await sleep(100);
    }
  })();
  // What the RSS is made of, from /metrics every second: V8's heap and the memory outside it (Buffers).
  const gauges = new Map<string, number>();
  /** V8's heap total every 5 s, with the records read by then: whether it grows with the export or plateaus. */
  const heapTrace: string[] = [];
  let lines = 0;
  const gaugeSampler = (async () => {
    for (let tick = 0; sampling; tick++) {
      for (const [series, mb] of await memoryGaugesOf(stack.web.url)) {
        gauges.set(series, Math.max(gauges.get(series) ?? 0, mb));
        if (series === 'heap total' && tick % 5 === 0) heapTrace.push(`${int(lines / 1_000)}k: ${mb.toFixed(0)}`);
      }
      await sleep(1_000);
    }
  })();
  const idleGauges = new Map(await memoryGaugesOf(stack.web.url));
  const started = performance.now();
  const response = await fetch(`${stack.web.url}/v1/ext/export/items`, { headers: { 'x-api-key': tenant.key } });
  if (response.status !== 200) throw new Error(`export: ${response.status} ${await response.text()}`);
  let bytes = 0;
  for await (const chunk of response.body!) {
    bytes += chunk.length;
    for (const byte of chunk as Uint8Array) if (byte === 10) lines++;
  }
  const seconds = (performance.now() - started) / 1_000;
  sampling = false;
  await Promise.all([sampler, gaugeSampler]);
  const gaugeText = [...gauges]
    .map(([series, mb]) => `${series} ${idleGauges.get(series)?.toFixed(0) ?? '?'} → max ${mb.toFixed(0)} MB`)
    .join(', ');
  const grew = peak - idle;
  return [
    {
      scenario: `export ${int(count)} items as NDJSON (one request)`,
      value: `${int(lines / seconds)} records/s`,
      pass: lines === count ? undefined : false,
      note: `${int(lines)} lines, ${int(bytes / 1024 / 1024)} MiB in ${seconds.toFixed(1)} s through HTTP from one MongoDB cursor${lines === count ? '' : ` (expected ${int(count)} lines)`}.`,
    },
    {
      scenario: `web RSS during the export of ${int(count)} items`,
      value: `+${grew.toFixed(0)} MB`,
      baseline: `${idle.toFixed(0)} MB idle`,
      target: `≤ +${EXPORT_RSS_BUDGET_MB} MB over idle`,
      pass: grew <= EXPORT_RSS_BUDGET_MB,
      note: `Peak RSS ${peak.toFixed(0)} MB, sampled every 100 ms with ps, against the RSS just before the export (${idle.toFixed(0)} MB). From /metrics, idle → highest during the export: ${gaugeText}; heap total (MB) by records read: ${heapTrace.join(', ')}.`,
    },
  ];
}

/** History read of one item with HISTORY_CHANGES changes: its first page (50 and 200 entries), p99 at load. */
async function historyReadRows(context: BenchContext): Promise<Row[]> {
  const { stack, options, seeded } = context;
  const tenant = seeded.crud;
  const headers = { 'x-api-key': tenant.key, ...json };
  const created = await fetch(`${stack.web.url}/v1/ext/items`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'History bench', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] }),
  });
  const item = (await created.json()) as { item_id: string };
  for (let change = 1; change < HISTORY_CHANGES; change++) {
    const response = await fetch(`${stack.web.url}/v1/ext/items/${item.item_id}`, {
      method: 'PATCH',
      headers,
      body: JSON.stringify({ name: `History bench ${change}` }),
    });
    if (response.status !== 200) throw new Error(`PATCH: ${response.status}`);
  }
  const history = stack.db.collection('record_history');
  for (let waited = 0; (await history.countDocuments({ resource_id: item.item_id })) < HISTORY_CHANGES; waited++) {
    if (waited > 300) throw new Error('the history of the bench item was never complete');
    await sleep(100);
  }
  const rows: Row[] = [];
  for (const limit of [50, 200]) {
    const target: LoadTarget = {
      url: `${stack.web.url}/v1/ext/items/${item.item_id}/history?limit=${limit}`,
      headers: { 'x-api-key': tenant.key },
      server: 'web',
    };
    // One client reading, as an integrator looking at one record does; the 10-connection figure is in the note.
    await fire(target, options.warmupSeconds, 1);
    const figures = await fire(target, options.runSeconds, 1);
    const loaded = await fire(target, options.runSeconds, options.connections);
    rows.push({
      scenario: `history of an item with ${int(HISTORY_CHANGES)} changes, first page of ${limit}`,
      value: `${int(figures.rps)} req/s`,
      p50: ms(figures.p50),
      p99: ms(figures.p99),
      target: `p99 ≤ ${HISTORY_P99_TARGET_MS} ms (one client)`,
      pass: figures.p99 <= HISTORY_P99_TARGET_MS && figures.failures === 0,
      note: `One connection for ${options.runSeconds} s; with ${options.connections} connections: ${int(loaded.rps)} req/s, p50 ${ms(loaded.p50)}, p99 ${ms(loaded.p99)}. Served by the record_changes index (company, record, sequence descending), which a real MongoDB walks for the page only; the stand-in gathers and sorts the record's ${int(HISTORY_CHANGES)} rows on every read. CPU: ${figures.cpu}.`,
    });
  }
  return rows;
}

/** Items the write scenario's web process is given before its load: the PATCH rotation. */
const PATCHED_ITEMS = 200;

/** Writes answered 2xx by the history scenario's process: each one a change, so one history row. */
interface Changes {
  answered: number;
}

const counted = (changes: Changes) => (status: number) => {
  if (status >= 200 && status < 300) changes.answered++;
};

/** A web process on a database of its own (so its sequencer holds that database's lease), with a tenant and items. */
async function isolatedWeb(stack: Stack, name: string, changes: Changes) {
  const dbName = `${stack.dbName}_${name.replaceAll('-', '_')}`;
  const web = await stack.startExtraWeb(name, { MONGO_DB: dbName });
  const tenant: Tenant = await createTenant({ ...stack, web }, `Bench ${name}`);
  const ids: string[] = [];
  for (let index = 0; index < PATCHED_ITEMS; index++) {
    const response = await fetch(`${web.url}/v1/ext/items`, {
      method: 'POST',
      headers: { 'x-api-key': tenant.key, ...json },
      body: JSON.stringify({ name: `Patched ${index}`, pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] }),
    });
    counted(changes)(response.status);
    ids.push(((await response.json()) as { item_id: string }).item_id);
  }
  const history = stack.db.client.db(dbName).collection('record_history');
  return { web, tenant, ids, history };
}

type HistorySide = Awaited<ReturnType<typeof isolatedWeb>>;

function createTarget(side: HistorySide, changes: Changes): LoadTarget {
  const body = JSON.stringify({
    name: 'Created with its history',
    pipeline_id: side.tenant.pipelineId,
    stage_id: side.tenant.stageIds[0],
  });
  return {
    url: side.web.url,
    server: 'web-history',
    method: 'POST',
    headers: { 'x-api-key': side.tenant.key, ...json },
    body,
    requests: [{ method: 'POST', path: '/v1/ext/items', body, onResponse: counted(changes) }],
  };
}

function patchTarget(side: HistorySide, changes: Changes): LoadTarget {
  let next = 0;
  return {
    url: side.web.url,
    server: 'web-history',
    method: 'PATCH',
    headers: { 'x-api-key': side.tenant.key, ...json },
    requests: [
      {
        method: 'PATCH',
        setupRequest: (request) => {
          const id = side.ids[next++ % side.ids.length]!;
          return { ...request, path: `/v1/ext/items/${id}`, body: JSON.stringify({ name: `Renamed ${next}` }) };
        },
        onResponse: counted(changes),
      },
    ],
  };
}

/** When the history holds a row for every change answered so far (performance.now()), or undefined after a minute. */
async function historyCaughtUp(side: HistorySide, changes: Changes): Promise<number | undefined> {
  const deadline = performance.now() + 60_000;
  while ((await side.history.countDocuments({ company_id: side.tenant.companyId })) < changes.answered) {
    if (performance.now() > deadline) return undefined;
    await sleep(50);
  }
  return performance.now();
}

/**
 * Create item and PATCH item (without `version`, rotating over PATCHED_ITEMS items) on a web process started for the
 * scenario on a database of its own, so that its sequencer holds that database's lease and writes the history row of
 * every change it makes readable. Information: requests per second, and history rows written per second from the
 * start of the load to the last row.
 */
async function writeRows(context: BenchContext): Promise<Row[]> {
  const { stack, options } = context;
  const changes: Changes = { answered: 0 };
  const side = await isolatedWeb(stack, 'web-history', changes);
  try {
    const rows: Row[] = [];
    for (const [label, target] of [
      ['create item', createTarget],
      ['PATCH item', patchTarget],
    ] as const) {
      process.stdout.write(`  ${label}, history written: warm-up`);
      await fire(target(side, changes), options.warmupSeconds, options.connections);
      await historyCaughtUp(side, changes);
      const before = changes.answered;
      const started = performance.now();
      const figures = await fire(target(side, changes), options.runSeconds, options.connections);
      const loadEnded = performance.now();
      const caughtUp = await historyCaughtUp(side, changes);
      const written = changes.answered - before;
      const rowsPerSecond = caughtUp === undefined ? 0 : (written * 1_000) / (caughtUp - started);
      process.stdout.write(`, ${int(figures.rps)} req/s, ${int(rowsPerSecond)} history rows/s\n`);
      rows.push({
        scenario: `${label}, its history row written by the sequencer`,
        value: `${int(figures.rps)} req/s; ${caughtUp === undefined ? 'history INCOMPLETE after 60 s' : `history ${int(rowsPerSecond)} rows/s`}`,
        p50: ms(figures.p50),
        p99: ms(figures.p99),
        // Information; a run that lost requests or history rows is broken, whatever it measured.
        pass: figures.failures === 0 && caughtUp !== undefined ? undefined : false,
        note: `A web process on a database of its own (its sequencer holds that lease), ${options.connections} connections for ${options.runSeconds} s: ${int(written)} changes answered, their history rows ${caughtUp === undefined ? 'not all written within 60 s' : `all written ${ms(caughtUp - loadEnded)} after the load ended`}; rows/s counts from the start of the load to the last row. The history costs the sequencer one insertMany per batch, off the request path. CPU (% of one core): ${figures.cpu}.`,
      });
    }
    return rows;
  } finally {
    await stack.children.stop(side.web.child);
  }
}

export async function runHistoryScenarios(context: BenchContext): Promise<Row[]> {
  console.log('History: writes and their history rows, a history read of 1,000 changes');
  return [...(await writeRows(context)), ...(await historyReadRows(context))];
}

export async function runExportScenario(context: BenchContext): Promise<Row[]> {
  console.log(`Export: ${int(context.options.exportItems)} items as NDJSON`);
  return exportRows(context);
}
