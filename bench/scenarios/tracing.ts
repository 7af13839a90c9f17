import { createServer } from 'node:http';
import { compare, fire, type LoadTarget } from '../load.js';
import { cpuMs as cpu, cpuRatio as cpuRatioOf, cpuRatiosText, int, ms, rpsRatio, type Row } from '../report.js';
import { atOnceSettings, json, type BenchContext } from './context.js';
import type { AddressInfo } from 'node:net';

/** An OTLP/HTTP receiver on loopback that only counts what arrives (the collector's cost is not ours). */
async function startOtlpSink() {
  const received = { requests: 0, bytes: 0 };
  const server = createServer((request, response) => {
    request.on('data', (chunk: Buffer) => (received.bytes += chunk.length));
    request.on('end', () => {
      received.requests++;
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** With the sampling docs/operations.md recommends for production, tracing may cost this much CPU per request. */
const SAMPLED_CPU_TARGET = 1.1;
/**
 * Requests per second of each side, the two loaded at the same time: together as much as one web process
 * was given alone before. An A/A pair (two untraced processes) read 1.01, 0.99, 1.03, 1.00, 0.96× and
 * 0.93, 0.98, 1.08, 1.04, 1.00× this way (medians 1.00, 1.00); in turns at 1,000 req/s, 0.93×.
 */
const RATE_PER_SIDE = 500;
/**
 * ...but at most this share of what the web process serves of create task at saturation: 500 req/s was a tenth of it
 * on the machine the rate was chosen on (4,900 req/s). A machine serving a fifth of that (2026-11-27, late: 700-900
 * req/s) was saturated by two sides at 500: they reached 330-485 req/s, requests queued, and a sampled request kept
 * the trace context storage (with its promise hooks) on for its whole wait, 31% of the time. The ratio read about the
 * same there (1.22x at 500, 1.24x at 60 req/s each), but only below saturation is it the comparison described.
 */
const RATE_SHARE_OF_CAPACITY = 0.1;
/**
 * Runs of each tracing comparison (unless --runs asks for more): one run's ratio moves by ±0.1–0.2 on a busy 2-core
 * machine, more than the whole budget. On 2026-12-01 the medians of three runs of the same code read 1.18–1.32×,
 * those of five 1.22, 1.22 and 1.24×; on 2026-12-06 an A/A pair (two untraced processes) read 0.78–1.22× over ten
 * runs (median 1.01×). Ten runs per variant take about 110 s each.
 */
const TRACING_RUNS = 10;
const PRODUCTION_SAMPLING = { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.05' };

/**
 * The cost of tracing on the request path: create task (a MongoDB write, the rate limit's Redis call,
 * then the event's publish) against web processes identical but for OTEL_EXPORTER_OTLP_ENDPOINT
 * (spans batched and exported over OTLP http/protobuf to a loopback sink), both started for this scenario: once with every request
 * traced (the worst case, information), once with the recommended 5% sampling (the target: at most
 * 10% more CPU per request). All run the production preload; without the endpoint it starts nothing.
 */
export async function runTracingScenario(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const sink = await startOtlpSink();
  stack.children.defer(() => sink.close());
  const headers = { 'x-api-key': seeded.crud.key, ...json };
  const body = JSON.stringify({ title: 'Call back about the renewal', due_at: '2031-01-15T09:30:00Z' });
  const target = (url: string, server: string) => ({
    url,
    method: 'POST' as const,
    headers,
    body,
    requests: [{ method: 'POST' as const, path: '/v1/ext/tasks', body }],
    server,
  });
  const rows: Row[] = [];
  const rate = options.rate ?? (await ratePerSide(context, target(stack.web.url, 'web')));
  const variants = [
    { name: 'web-traced', label: 'every request traced', env: {}, judged: false },
    {
      name: 'web-sampled',
      label: '5% sampled (parentbased_traceidratio 0.05)',
      env: PRODUCTION_SAMPLING,
      judged: true,
    },
  ];
  for (const variant of variants) {
    // The "off" side is a process started the same way at the same moment (same preload, settings and
    // warm-up), fresh for each variant like its "on" side: not the usual web process, nor one that has
    // served an earlier variant, whose JIT and heap would be in another state (warmer: a traced process
    // has more code to compile). Only OTEL_EXPORTER_OTLP_ENDPOINT differs.
    const [untraced, traced] = await Promise.all([
      stack.startExtraWeb('web-untraced', {}),
      stack.startExtraWeb(variant.name, { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, ...variant.env }),
    ]);
    try {
      await warmUpAtSaturation(context, [target(traced.url, variant.name), target(untraced.url, 'web-untraced')]);
      const exportsBefore = { ...sink.received }; // the note counts the exports of the paced part only
      const comparison = await compare(
        `create task, tracing ${variant.label} vs off`,
        () => target(traced.url, variant.name),
        () => target(untraced.url, 'web-untraced'),
        // Both at once at a fixed rate (--rate, else ratePerSide): CPU per request below saturation,
        // with the machine's slow and fast spells on both sides alike; at least TRACING_RUNS runs.
        atOnceSettings(options, rate, TRACING_RUNS),
      );
      const { ours: on, baseline: off } = comparison;
      const cpuRatio = cpuRatioOf(comparison);
      if (rows.length === 0) {
        rows.push({
          scenario: 'create task, tracing off (preload, no OTLP endpoint; a web process started alongside)',
          value: int(off.rps),
          p50: ms(off.p50),
          p99: ms(off.p99),
          target: 'reference',
          note: `CPU of the web process per request with tracing off: ${cpu(off.serverCpuMs)}. CPU (% of one core): ${off.cpu}.`,
        });
      }
      rows.push({
        scenario: `create task, tracing on, ${variant.label}`,
        value: int(on.rps),
        p50: ms(on.p50),
        p99: ms(on.p99),
        baseline: `${int(off.rps)} (tracing off)`,
        ratio: rpsRatio(comparison),
        target: variant.judged ? `CPU per request ≤ ${SAMPLED_CPU_TARGET}× off` : 'info',
        ...(variant.judged
          ? { pass: cpuRatio !== undefined && cpuRatio <= SAMPLED_CPU_TARGET && on.failures + off.failures === 0 }
          : {}),
        note:
          `CPU of the web process per request: ${cpu(on.serverCpuMs)} on vs ${cpu(off.serverCpuMs)} off` +
          `${cpuRatio === undefined ? '' : `; ${cpuRatio.toFixed(2)}×, the median of the runs' ratios or, swapped between cores, of their pairs' (${cpuRatiosText(comparison)}), both sides loaded at once at ${int(rate)} req/s each`}. ` +
          `The sink received ${int(sink.received.requests - exportsBefore.requests)} OTLP exports, ` +
          `${int((sink.received.bytes - exportsBefore.bytes) / 1024)} KiB. CPU (% of one core): ${on.cpu}.`,
      });
    } finally {
      await Promise.all([stack.children.stop(traced.child), stack.children.stop(untraced.child)]);
    }
  }
  return rows;
}

/**
 * Seconds both fresh processes serve create task together as fast as they answer, before the comparison's own
 * warm-up at the fixed rate. V8 compiles a process's hot code after enough calls, not enough seconds, and
 * at 60-90 req/s (a tenth of capacity on a slow machine) its 10 s of paced warm-up were 800 requests: CPU per
 * request of both sides kept falling for another 6,000 (2.97 to 1.12 ms each at 250 req/s, 2026-11-29), the
 * traced process, with more code to compile, later than its twin. Its first run then read 1.10-1.19x even
 * with sampling off (always_off; later runs 0.97-1.04x), so the comparison measured warm-up, not tracing.
 */
const SATURATED_WARMUP_SECONDS = 15;

async function warmUpAtSaturation({ options }: BenchContext, targets: LoadTarget[]): Promise<void> {
  const seconds = options.quick ? options.warmupSeconds : SATURATED_WARMUP_SECONDS;
  await Promise.all(targets.map((target) => fire(target, seconds, options.connections)));
}

/** RATE_PER_SIDE, or RATE_SHARE_OF_CAPACITY of the create tasks the web process serves at saturation if that is less. */
async function ratePerSide({ options }: BenchContext, untraced: LoadTarget): Promise<number> {
  const seconds = Math.max(2, Math.round(options.runSeconds / 2));
  await fire(untraced, seconds, options.connections); // warm-up
  const capacity = (await fire(untraced, seconds, options.connections)).rps;
  const rate = Math.min(RATE_PER_SIDE, Math.max(50, Math.round((capacity * RATE_SHARE_OF_CAPACITY) / 10) * 10));
  console.log(`  create task at saturation: ${int(capacity)} req/s; each side loaded at ${int(rate)} req/s`);
  return rate;
}
