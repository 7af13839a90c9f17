import { createServer } from 'node:http';
import { compare } from '../load.js';
import { int, ms, type Row } from '../report.js';
import { compareSettings, json, type BenchContext } from './context.js';
import type { AddressInfo } from 'node:net';

/** Tracing every request may cost at most this share of create-task throughput. */
const TRACING_TARGET = 0.7;

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
 * The cost of tracing on the request path: create task (a MongoDB write, the rate limit's Redis call,
 * then the event's publish) against a second web process identical but for OTEL_EXPORTER_OTLP_ENDPOINT
 * (spans batched and exported over OTLP http/protobuf to a loopback sink, SDK defaults otherwise).
 * Both run the production preload; without the endpoint it starts nothing.
 */
export async function runTracingScenario(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const sink = await startOtlpSink();
  stack.children.defer(() => sink.close());
  const traced = await stack.startExtraWeb('web-traced', { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url });
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
  try {
    const comparison = await compare(
      'create task, tracing on vs off',
      () => target(traced.url, 'web-traced'),
      () => target(stack.web.url, 'web'),
      compareSettings(options),
    );
    const { ours: on, baseline: off } = comparison;
    const ratio = on.rps / off.rps;
    const cpu = (value: number | undefined) => (value === undefined ? 'n/a' : `${value.toFixed(3)} ms`);
    const extra =
      on.serverCpuMs !== undefined && off.serverCpuMs !== undefined
        ? ` (+${(((on.serverCpuMs - off.serverCpuMs) / off.serverCpuMs) * 100).toFixed(0)}%)`
        : '';
    return [
      {
        scenario: 'create task, tracing off (preload, no OTLP endpoint)',
        value: int(off.rps),
        p50: ms(off.p50),
        p99: ms(off.p99),
        target: 'reference',
        note: `CPU of the web process per request with tracing off: ${cpu(off.serverCpuMs)}. CPU (% of one core): ${off.cpu}.`,
      },
      {
        scenario: 'create task, tracing on (OTLP to a loopback sink)',
        value: int(on.rps),
        p50: ms(on.p50),
        p99: ms(on.p99),
        baseline: `${int(off.rps)} (tracing off)`,
        ratio,
        target: `ratio ≥ ${TRACING_TARGET}`,
        pass: ratio >= TRACING_TARGET && on.failures + off.failures === 0,
        note:
          `CPU of the web process per request with tracing on: ${cpu(on.serverCpuMs)}${extra}; off: ${cpu(off.serverCpuMs)}. ` +
          `Up to 14 spans per request (request, handler, MongoDB, Redis, outbox publish, BullMQ adds; fewer when publishes are shared); ` +
          `the sink received ${int(sink.received.requests)} OTLP exports, ${int(sink.received.bytes / 1024)} KiB. CPU (% of one core): ${on.cpu}.`,
      },
    ];
  } finally {
    await stack.children.stop(traced.child);
  }
}
