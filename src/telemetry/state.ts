import { ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import type { Telemetry } from 'bullmq';

/**
 * Whether this process traces, shared by the preload that starts the SDK and the code that carries
 * trace context through MongoDB and the queues. Without the SDK nothing here does anything, so the
 * service pays nothing for tracing it does not do.
 */
interface Started {
  queueTelemetry: Telemetry;
  /** Keeps the trace context storage on until the returned function is called (see context.ts). */
  holdContext(): () => void;
  /** The context to start a new trace's span in, or undefined when it goes unrecorded (see sdk.ts, newTraceDrawn). */
  newTrace(): Context | undefined;
  shutdown(): Promise<void>;
}

let started: Started | undefined;

/** Tracing runs when an OTLP endpoint is configured and the SDK is not disabled (standard OTEL_* variables). */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

export function markTracingStarted(state: Started): void {
  started = state;
}

export function tracingStarted(): boolean {
  return started !== undefined;
}

/** BullMQ's telemetry (bullmq-otel) for queues, flow producers and workers; undefined when not tracing. */
export function queueTelemetry(): Telemetry | undefined {
  return started?.queueTelemetry;
}

/** Keeps the trace context storage on, e.g. for a request whose context must reach its events; a no-op when not tracing. */
export function holdTraceContext(): () => void {
  return started?.holdContext() ?? (() => {});
}

/**
 * Where a request without a caller's trace starts its span: undefined when the sampler would not record
 * it, so the request makes no span at all. Without the SDK (unit tests of the request spans), the root
 * context: the registered tracer decides.
 */
export function newTraceContext(): Context | undefined {
  return started ? started.newTrace() : ROOT_CONTEXT;
}

/** Exports what is still buffered and stops the SDK (at shutdown); a no-op when not tracing. */
export async function shutdownTracing(): Promise<void> {
  const current = started;
  started = undefined;
  await current?.shutdown();
}
