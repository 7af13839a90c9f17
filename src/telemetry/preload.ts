/**
 * The `--import` preload of both processes (`node --import ./dist/src/telemetry/preload.js ...`): starts
 * OpenTelemetry before any instrumented module (fastify, mongodb, ioredis) is loaded, and only
 * when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. Otherwise it loads
 * nothing at all: no SDK, no module hooks.
 */
import { tracingRequested } from './state.js';

if (tracingRequested(process.env)) {
  const { startTracing, serviceNameFor } = await import('./sdk.js');
  await startTracing({ serviceName: serviceNameFor(process.argv[1] ?? '') });
}
