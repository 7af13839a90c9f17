import { fire } from '../load.js';
import { int, type Row } from '../report.js';
import { flatness, type RssSampler } from '../rss.js';
import { json, type BenchContext } from './context.js';
import type autocannon from 'autocannon';

const SOAK_RATE = 200;
const MAX_SPREAD_PERCENT = 10;

/**
 * A steady mixed load (reads, a list, task creations whose task.created events the worker delivers
 * to the receiver) for `soakSeconds`, while the RSS of the web and worker processes is sampled every
 * second. Flat means every sample of the judged window is within ±10% of the window's median.
 */
export async function runMemorySoak(context: BenchContext, sampler: RssSampler): Promise<Row[]> {
  const { stack, seeded, options } = context;
  console.log(`Memory soak: ${options.soakSeconds} s at ${SOAK_RATE} req/s after a settling run`);
  const crud = { 'x-api-key': seeded.crud.key };
  let next = 0;
  const body = JSON.stringify({ title: 'Soak task', due_at: '2031-01-15T09:30:00Z' });
  const requests: autocannon.Request[] = [
    {
      headers: crud,
      setupRequest: (request) => ({
        ...request,
        path: `/v1/ext/items/${seeded.itemIds[next++ % seeded.itemIds.length]}`,
      }),
    },
    { headers: crud, path: `/v1/ext/pipelines/${seeded.crud.pipelineId}` },
    { headers: crud, path: `/v1/ext/items?limit=20&pipeline_id=${seeded.crud.pipelineId}` },
    { method: 'POST', headers: { 'x-api-key': seeded.hooks.key, ...json }, path: '/v1/ext/tasks', body },
  ];
  // The heap grown by the heavier scenarios before is given back first (V8's memory reducer), so the
  // soak judges the steady state at this load and not that shrinking.
  await fire({ url: stack.web.url, requests, overallRate: SOAK_RATE }, options.quick ? 3 : 20, 8);
  const started = Date.now();
  const load = await fire({ url: stack.web.url, requests, overallRate: SOAK_RATE }, options.soakSeconds, 8);
  const ended = Date.now();
  // --quick judges its whole (short) soak; the full run the last half of 60 s, after warm-up effects.
  const from = options.quick ? started : started + (ended - started) / 2;
  const window = options.quick ? 'whole soak' : 'last half';

  const rows: Row[] = [];
  for (const name of ['web', 'worker']) {
    const figures = flatness(sampler.between(name, from, ended));
    const whole = flatness(sampler.between(name, 0, Number.POSITIVE_INFINITY));
    if (!figures || !whole) {
      rows.push({
        scenario: `memory: ${name} RSS`,
        value: 'no samples (process not running)',
        target: `±${MAX_SPREAD_PERCENT}%`,
        pass: false,
      });
      continue;
    }
    rows.push({
      scenario: `memory: ${name} RSS during a ${options.soakSeconds} s soak (${window})`,
      value:
        `${figures.first.toFixed(0)} → ${figures.last.toFixed(0)} MB (min ${figures.min.toFixed(0)}, max ${figures.max.toFixed(0)}; ` +
        `±${figures.spreadPercent.toFixed(1)}% of the median; trend ${figures.slopeMbPerMinute >= 0 ? '+' : ''}${figures.slopeMbPerMinute.toFixed(1)} MB/min; ` +
        `post-GC floor ${figures.floorFirst.toFixed(0)} → ${figures.floorLast.toFixed(0)} MB)`,
      target: `±${MAX_SPREAD_PERCENT}% over the ${window}`,
      pass: figures.spreadPercent <= MAX_SPREAD_PERCENT,
      note:
        name === 'web'
          ? `Soak load: ${int(load.rps)} req/s achieved (${int(load.failures)} failures) cycling GET item, GET pipeline, list 20 items, POST task (delivered as a webhook). ` +
            `Over the whole benchmark the web RSS ranged ${whole.min.toFixed(0)}–${whole.max.toFixed(0)} MB.`
          : `Over the whole benchmark (from its start) the worker RSS ranged ${whole.min.toFixed(0)}–${whole.max.toFixed(0)} MB. ` +
            'RSS of a Node process under steady load is a GC saw-tooth; a leak shows as a rising trend and a rising post-GC floor. Every sample is in rss.csv in the log directory.',
    });
  }
  return rows;
}
