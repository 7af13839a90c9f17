import { fire } from '../load.js';
import { int, type Row } from '../report.js';
import { flatness, heapSeries, rssAfterGcSeries, type RssSampler } from '../rss.js';
import { json, type BenchContext } from './context.js';
import type { Tenant } from '../seed.js';
import type autocannon from 'autocannon';

const SOAK_RATE = 200;
const SOAK_ITEMS = 200;
/** The web process the soak loads and samples (started for it: see runMemorySoak). */
const SOAK_WEB = 'web-soak';

/** Items created through the API in the tenant's pipeline, for the soak to read. */
async function createItems(url: string, tenant: Tenant, headers: Record<string, string>): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < SOAK_ITEMS; index++) {
    const response = await fetch(`${url}/v1/ext/items`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        name: `Soak deal ${index}`,
        pipeline_id: tenant.pipelineId,
        stage_id: tenant.stageIds[0],
      }),
    });
    if (response.status !== 201) throw new Error(`creating a soak item: ${response.status} ${await response.text()}`);
    ids.push(((await response.json()) as { item_id: string }).item_id);
  }
  return ids;
}
/** The bar: over the judged window, neither RSS nor the post-GC heap may trend up or down by more. */
const MAX_TREND_MB = 5;

/**
 * A steady mixed load (reads, a list, task creations whose task.created events the worker delivers
 * to the receiver) for `soakSeconds`, while the RSS of the web and worker processes is sampled every
 * second and their heap and RSS right after a full GC every 5 s. Flat means the Theil–Sen trend (rss.ts) of those over the judged
 * window stays within ±5 MB (a leak's steady rise; the GC saw-tooth around a flat line does not count).
 */
export async function runMemorySoak(context: BenchContext, sampler: RssSampler): Promise<Row[]> {
  const { stack, seeded, options } = context;
  console.log(`Memory soak: ${options.soakSeconds} s at ${SOAK_RATE} req/s after a settling run`);
  // The soak reads a pipeline of SOAK_ITEMS items of its own, not the 10,000 of the CRUD company: the
  // stand-in answers a list by sorting every item of the pipeline (MongoDB walks an index), and the
  // soak is about our processes' memory, not the stand-in's sort. (It was a suspect for the web's RSS
  // saw-tooth, whose list documents a heap-sampling profile showed promoted; the saw-tooth stayed.)
  const tenant = seeded.hooks;
  const headers = { 'x-api-key': tenant.key, ...json };
  // A web process of its own, as the worker (started after the request scenarios) and `--only=memory`
  // have: the usual one served the saturation scenarios, and V8 keeps shrinking the heap they grew
  // through the whole soak, a falling RSS trend with the heap used flat: giving back, not leaking.
  const web = await stack.startExtraWeb(SOAK_WEB, {});
  sampler.watch(SOAK_WEB, web.child.pid, web.url);
  const itemIds = await createItems(web.url, tenant, headers);
  let next = 0;
  const body = JSON.stringify({ title: 'Soak task', due_at: '2031-01-15T09:30:00Z' });
  const requests: autocannon.Request[] = [
    {
      headers,
      setupRequest: (request) => ({ ...request, path: `/v1/ext/items/${itemIds[next++ % itemIds.length]}` }),
    },
    { headers, path: `/v1/ext/pipelines/${tenant.pipelineId}` },
    { headers, path: `/v1/ext/items?limit=20&pipeline_id=${tenant.pipelineId}` },
    { method: 'POST', headers, path: '/v1/ext/tasks', body },
  ];
  // A settling run first: caches fill, the code is optimized and the heap finds its size at this load.
  await fire({ url: web.url, requests, overallRate: SOAK_RATE }, options.quick ? 3 : 20, 8);
  const started = Date.now();
  const load = await fire({ url: web.url, requests, overallRate: SOAK_RATE }, options.soakSeconds, 8);
  const ended = Date.now();
  // The last half is judged, after the caches filled and the heap found its size.
  const from = started + (ended - started) / 2;
  const window = 'last half';

  const rows: Row[] = [];
  const judged: [label: string, name: string][] = [
    ['web', SOAK_WEB],
    ['worker', 'worker'],
  ];
  for (const [label, name] of judged) {
    const rss = flatness(sampler.between(name, from, ended));
    const heap = flatness(sampler.between(heapSeries(name), from, ended));
    const rssAfterGc = flatness(sampler.between(rssAfterGcSeries(name), from, ended));
    const wholeRun = sampler.between(name, 0, Number.POSITIVE_INFINITY).map((sample) => sample.mb);
    const whole = wholeRun.length > 0 ? { min: Math.min(...wholeRun), max: Math.max(...wholeRun) } : undefined;
    const scenario = `memory: ${label} RSS and heap after full GCs during a ${options.soakSeconds} s soak (${window})`;
    const target = `trend within ±${MAX_TREND_MB} MB over the ${window} (RSS and heap, each right after a full GC)`;
    if (!rss || !heap || !rssAfterGc || !whole) {
      rows.push({ scenario, value: 'no samples (process not running, or no full GC reported)', target, pass: false });
      continue;
    }
    const signed = (mb: number) => `${mb >= 0 ? '+' : ''}${mb.toFixed(1)}`;
    rows.push({
      scenario,
      value:
        `RSS after full GC ${rssAfterGc.first.toFixed(0)} → ${rssAfterGc.last.toFixed(0)} MB, trend ${signed(rssAfterGc.trendMb)} MB (least squares ${signed(rssAfterGc.leastSquaresTrendMb)}); ` +
        `heap after full GC ${heap.first.toFixed(1)} → ${heap.last.toFixed(1)} MB, trend ${signed(heap.trendMb)} MB (least squares ${signed(heap.leastSquaresTrendMb)}) ` +
        `(RSS every second: ${rss.first.toFixed(0)} → ${rss.last.toFixed(0)} MB, min ${rss.min.toFixed(0)}, max ${rss.max.toFixed(0)}, trend of the saw-tooth ${signed(rss.trendMb)} MB)`,
      target,
      pass: Math.abs(rssAfterGc.trendMb) <= MAX_TREND_MB && Math.abs(heap.trendMb) <= MAX_TREND_MB,
      note:
        label === 'web'
          ? `Soak load: ${int(load.rps)} req/s achieved (${int(load.failures)} failures) cycling GET item, GET pipeline, list 20 items (a pipeline of ${SOAK_ITEMS}), POST task (delivered as a webhook). ` +
            `A web process started for the soak (settling run included): its RSS ranged ${whole.min.toFixed(0)}–${whole.max.toFixed(0)} MB.`
          : `Over the whole benchmark (from its start) the worker RSS ranged ${whole.min.toFixed(0)}–${whole.max.toFixed(0)} MB. ` +
            'Trend: the median slope between every two samples (Theil–Sen), times the window; least squares beside it. RSS of a Node process under steady load is a GC saw-tooth ' +
            '(old-generation garbage and the Buffers it holds, given back at each full collection: rss.csv records heap total and external memory every 5 s), whose trend over a window of a few cycles depends on where the window cuts them; ' +
            'a leak lifts what is left right after each full collection: nodejs_heap_used_after_full_gc_bytes and process_resident_memory_after_full_gc_bytes, read from /metrics every 5 s. Every sample is in rss.csv in the log directory.',
    });
  }
  // Idle from here on, it would only compete with the webhook scenarios that follow.
  await stack.children.stop(web.child);
  return rows;
}
