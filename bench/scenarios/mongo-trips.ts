// MongoDB round trips per request on the happy path, counted by the driver's command monitoring
// (MONGO_COMMAND_METRICS: mongodb_commands_total on /metrics) in a second web process of its own, so
// the monitoring costs nothing in the timed scenarios. Counts, unlike speeds, do not depend on load.
import { must } from '../../src/shared/must.js';
import { fire } from '../load.js';
import { int, type Row } from '../report.js';
import { json, type BenchContext } from './context.js';
import type { Service } from '../stack.js';

export type Counts = Map<string, number>;

/** mongodb_commands_total by "command collection", from a web process or a worker's metrics server. */
export async function commandCounts(service: Pick<Service, 'url'>): Promise<Counts> {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  const counts: Counts = new Map();
  for (const match of text.matchAll(/^mongodb_commands_total\{([^}]*)\} (\d+(?:\.\d+)?)$/gm)) {
    const labels = Object.fromEntries(
      [...must(match[1], 'labels').matchAll(/(\w+)="([^"]*)"/g)].map((label) => [label[1], label[2]]),
    );
    counts.set(`${labels.command} ${labels.collection}`.trim(), Number(match[2]));
  }
  return counts;
}

export function difference(after: Counts, before: Counts): Counts {
  const delta: Counts = new Map();
  for (const [key, value] of after) {
    const change = value - (before.get(key) ?? 0);
    if (change > 0) delta.set(key, change);
  }
  return delta;
}

/** After the response: recording a write's events in `events` and clearing them from the document's outbox. */
const OUTBOX_MOVE = new Set(['insert events', 'update items', 'update tasks']);
/**
 * Not the requests': last_used_at of API keys (one bulk write per 5 s), and the outbox gauge that
 * the /metrics scrape itself reads (countDocuments: an aggregate on items and tasks).
 */
const NOT_THE_REQUESTS = new Set(['update api_keys', 'aggregate items', 'aggregate tasks']);

/** Records the process caches for 5 s (API key, company, pipeline): reloaded once per lifetime, not per request. */
const CACHE_RELOADS = new Set(['find api_keys', 'find companies', 'find pipelines', 'find users']);

interface Split {
  /** The requests' own round trips, cache reloads left out. */
  path: number;
  /** Reloads of cached records: near 0 when they are cached, about 1 per request when something reads them every time. */
  reloads: number;
  clears: number;
  breakdown: string;
}

function split(delta: Counts, requests: number, cached: string[] = []): Split {
  let path = 0;
  let reloads = 0;
  let clears = 0;
  const parts: string[] = [];
  for (const [key, value] of [...delta].sort()) {
    if (NOT_THE_REQUESTS.has(key)) continue;
    if (OUTBOX_MOVE.has(key)) {
      if (key !== 'insert events') clears += value;
    } else if (CACHE_RELOADS.has(key) || cached.includes(key)) reloads += value;
    else path += value;
    parts.push(`${key} ${(value / requests).toFixed(2)}`);
  }
  return {
    path: path / requests,
    reloads: reloads / requests,
    clears: clears / requests,
    breakdown: parts.join(', '),
  };
}

/** A cache reloading every few seconds stays far below this share of requests; one read per request does not. */
const MAX_RELOADS = 0.1;
/**
 * The same bound in time, for requests slow enough (a list on the stand-in full of records) that one
 * reload per record per cache lifetime (4–5 s; three records: key, company, pipeline) exceeds 0.1 per
 * request: then the reloads must stay within about one per second, which a read per request does not.
 */
const MAX_RELOADS_PER_SECOND = 1;

/** Sequential requests (one at a time), insisting on a 2xx answer. */
async function sequentially(count: number, send: (index: number) => Promise<Response>): Promise<void> {
  for (let index = 0; index < count; index++) {
    const response = await send(index);
    await response.arrayBuffer();
    if (response.status >= 300) throw new Error(`expected 2xx, got ${response.status} from ${response.url}`);
  }
}

export async function runMongoTripScenarios(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const tenant = seeded.crud;
  console.log('MongoDB round trips (a web process with MONGO_COMMAND_METRICS=true)');
  const web = await stack.startExtraWeb('web-counting', { MONGO_COMMAND_METRICS: 'true' });
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${web.url}/v1/ext${path}`, {
      ...init,
      headers: { 'x-api-key': tenant.key, ...json, ...(init.headers as Record<string, string>) },
    });
  const requests = Math.min(options.redisTripRequests, seeded.itemIds.length / 4);
  // Disjoint slices of the seeded items, so each case meets items in the state it describes.
  const slice = (part: number) => seeded.itemIds.slice(part * requests, (part + 1) * requests);
  const [getIds, warmPatchIds, coldPatchIds] = [slice(0), slice(1), slice(2)];
  const task = (extra: object = {}) =>
    JSON.stringify({ title: 'Round trip probe', due_at: '2031-01-15T09:30:00Z', ...extra });
  const versions = new Map<string, number>();
  const referencedItem = must(seeded.itemIds.at(-1), 'a seeded item');

  const cases: Array<{
    label: string;
    /** Absent: information. */
    target?: string;
    max?: number;
    /** Reads that this case answers from a cache (reloaded every few seconds), besides CACHE_RELOADS. */
    cached?: string[];
    prepare?: () => Promise<void>;
    send: (index: number) => Promise<Response>;
  }> = [
    {
      label: 'GET /items/{id}',
      target: '1',
      max: 1,
      send: (index) => api(`/items/${getIds[index]}`),
    },
    {
      label: 'GET /items (list, limit 50)',
      target: '1',
      max: 1,
      send: () => api(`/items?limit=50&pipeline_id=${tenant.pipelineId}`),
    },
    {
      label: 'POST /items',
      target: '≤ 1.1 (short_id numbers in blocks)',
      max: 1.1,
      send: (index) =>
        api('/items', {
          method: 'POST',
          body: JSON.stringify({
            name: `Probe ${index}`,
            pipeline_id: tenant.pipelineId,
            stage_id: tenant.stageIds[0],
          }),
        }),
    },
    {
      label: 'POST /tasks',
      target: '1',
      max: 1,
      send: () => api('/tasks', { method: 'POST', body: task() }),
    },
    {
      label: 'POST /tasks with assigned_to and item_id',
      target: '1 (references from the per-company caches)',
      max: 1,
      cached: ['find items'],
      send: () =>
        api('/tasks', { method: 'POST', body: task({ assigned_to: tenant.userId, item_id: referencedItem }) }),
    },
    {
      label: 'PATCH /items/{id} with version, after the client read it',
      target: '1 (the conditional findOneAndUpdate)',
      max: 1,
      // The client's read that tells it the version: this process has seen the item at it.
      prepare: async () => {
        for (const id of warmPatchIds) {
          const response = await api(`/items/${id}`);
          versions.set(id, ((await response.json()) as { version: number }).version);
        }
      },
      send: (index) => {
        const id = must(warmPatchIds[index], 'an item');
        return api(`/items/${id}`, {
          method: 'PATCH',
          body: JSON.stringify({ name: `Renamed ${index}`, version: versions.get(id) }),
        });
      },
    },
    {
      label: 'PATCH /items/{id} with version this process never saw (a read and the conditional write)',
      prepare: async () => {
        const docs = await stack.db
          .collection<{ _id: string; version: number }>('items')
          .find({ _id: { $in: coldPatchIds } }, { projection: { version: 1 } })
          .toArray();
        for (const doc of docs) versions.set(doc._id, doc.version);
      },
      send: (index) => {
        const id = must(coldPatchIds[index], 'an item');
        return api(`/items/${id}`, {
          method: 'PATCH',
          body: JSON.stringify({ name: `Renamed ${index}`, version: versions.get(id) }),
        });
      },
    },
  ];

  // Warm-up: the key, the pipeline, the cursor secret and the referenced records cached; a short_id block taken.
  await sequentially(5, (index) =>
    api('/items', {
      method: 'POST',
      body: JSON.stringify({ name: `Warm-up ${index}`, pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] }),
    }),
  );
  await sequentially(5, () =>
    api('/tasks', { method: 'POST', body: task({ assigned_to: tenant.userId, item_id: referencedItem }) }),
  );
  await sequentially(5, () => api(`/items?limit=50&pipeline_id=${tenant.pipelineId}`));

  const rows: Row[] = [];
  for (const probe of cases) {
    await probe.prepare?.();
    await new Promise((resolve) => setTimeout(resolve, 200)); // earlier outbox moves done
    const before = await commandCounts(web);
    const started = Date.now();
    await sequentially(requests, probe.send);
    const seconds = (Date.now() - started) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 200)); // this case's outbox moves done
    const counted = split(difference(await commandCounts(web), before), requests, probe.cached);
    const reloadsPerSecond = (counted.reloads * requests) / seconds;
    const cached = counted.reloads <= MAX_RELOADS || reloadsPerSecond <= MAX_RELOADS_PER_SECOND;
    rows.push({
      scenario: `MongoDB round trips per request: ${probe.label}`,
      value: `${counted.path.toFixed(2)} trips + ${counted.reloads.toFixed(2)} cache reloads (${reloadsPerSecond.toFixed(2)}/s over ${seconds.toFixed(1)} s; ${counted.breakdown})`,
      ...(probe.target === undefined ? {} : { target: probe.target }),
      pass: probe.max === undefined ? undefined : counted.path <= probe.max + 1e-9 && cached,
    });
  }

  // Under load: the outbox moves of writes answered together are shared.
  const loadSeconds = Math.min(options.runSeconds, 5);
  const before = await commandCounts(web);
  const load = await fire(
    {
      url: web.url,
      method: 'POST',
      headers: { 'x-api-key': tenant.key, ...json },
      body: task(),
      requests: [{ method: 'POST', path: '/v1/ext/tasks', body: task() }],
    },
    loadSeconds,
    options.connections,
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  const underLoad = split(difference(await commandCounts(web), before), load.requests);
  rows.push({
    scenario: `MongoDB round trips per request: outbox clearing under load (POST /tasks, ${options.connections} connections, ${int(load.rps)} req/s)`,
    value: `${underLoad.clears.toFixed(3)} clears (all: ${underLoad.breakdown})`,
    target: '≤ 0.1',
    pass: underLoad.clears <= 0.1 && load.failures === 0,
    note:
      `Counted with the driver's command monitoring (mongodb_commands_total of a second web process started with MONGO_COMMAND_METRICS=true) over ${int(requests)} sequential requests per case; one command is one round trip (a bulk write of many documents is one). ` +
      "The request's own trips are the figure; reloads of records cached for a few seconds (API key, company, pipeline, a task's referenced item) are counted apart (at most 0.1 per request, or when requests are slow at most 1 per second: a read per request would be 1 per request), and the breakdown also lists, after the response, the outbox move (insert events: the events recorded; update items/tasks: the outbox cleared), shared by the writes of each 25 ms under load. " +
      'Left out: the API keys\u2019 last_used_at (one bulk write per 5 s) and the /metrics scrape\u2019s own outbox gauge.',
  });
  await stack.children.stop(web.child);
  return rows;
}
