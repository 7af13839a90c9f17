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

/**
 * Requests per second of each side, the two loaded at the same time: together as much as one web process
 * is given alone elsewhere, and well below saturation, where an A/A pair (two untraced processes) reads 1.00×.
 */
const RATE_PER_SIDE = 500;
/**
 * ...but at most this share of what the web process serves of create task at saturation, on a slower machine:
 * two saturated sides queue requests, and a sampled request then keeps the trace context storage (with its
 * promise hooks) on for its whole wait, which is not the comparison described.
 */
const RATE_SHARE_OF_CAPACITY = 0.1;
/**
 * Runs of each tracing comparison (unless --runs asks for more): one run's ratio moves by ±0.1–0.2 on a busy 2-core
 * machine. Ten runs per variant take about 110 s each.
 */
const TRACING_RUNS = 10;
const PRODUCTION_SAMPLING = { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.05' };

/**
 * The cost of tracing on the request path: create task (a MongoDB write, the rate limit's Redis call,
 * then the event's publish) against web processes identical but for OTEL_EXPORTER_OTLP_ENDPOINT
 * (spans batched and exported over OTLP http/protobuf to a loopback sink), both started for this scenario: once with every request
 * traced (the worst case), once with the recommended 5% sampling. Information, both: CPU per request of each
 * against tracing off. All run the production preload; without the endpoint it starts nothing.
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
    { name: 'web-traced', label: 'every request traced', env: {} },
    { name: 'web-sampled', label: '5% sampled (parentbased_traceidratio 0.05)', env: PRODUCTION_SAMPLING },
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
        // Information; failed requests make it a broken run.
        pass: on.failures + off.failures === 0 ? undefined : false,
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
 * warm-up at the fixed rate. V8 compiles a process's hot code after enough calls, not enough seconds: at a
 * tenth of capacity on a slow machine the paced warm-up alone is too few calls, and the traced process, with
 * more code to compile, would still be warming up in the first measured run.
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
