import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context } from '@opentelemetry/api';
import { tracingStarted } from './state.js';
import { inUnsampledTrace } from './unsampled.js';

/**
 * How one trace follows an event from the request that recorded it to its webhooks, across processes:
 * the W3C trace context of the recording span is stored with the event (outbox, `events`, job data),
 * never in what receivers get, and whoever moves the event on continues that trace.
 */
export interface EventTraceContext {
  traceparent?: string;
  tracestate?: string;
}

/** The active span's trace context, to store with an event; empty when not tracing or outside a span. */
export function currentTraceContext(): EventTraceContext {
  if (!tracingStarted()) return {};
  const carrier: EventTraceContext = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent
    ? { traceparent: carrier.traceparent, ...(carrier.tracestate ? { tracestate: carrier.tracestate } : {}) }
    : {};
}

function storedContext(event: EventTraceContext): Context | undefined {
  if (!event.traceparent) return undefined;
  const extracted = propagation.extract(ROOT_CONTEXT, {
    traceparent: event.traceparent,
    ...(event.tracestate ? { tracestate: event.tracestate } : {}),
  });
  return trace.getSpanContext(extracted) ? extracted : undefined;
}

const tracer = trace.getTracer('pipeline-records');

/**
 * Runs the move of recorded events to the queues in a span `outbox publish` that continues the trace of
 * the events (the usual batch: one request's). A batch mixing several traces starts one of its own,
 * linked to each (at most 32). Events without a stored trace context are not traced.
 */
export async function inPublishSpan<T>(events: EventTraceContext[], fn: () => Promise<T>): Promise<T> {
  if (!tracingStarted()) return fn();
  const contexts = events.map(storedContext).filter((stored): stored is Context => stored !== undefined);
  const first = contexts[0];
  if (!first) return fn();
  // Only unsampled traces: no span to make (nor under it), but the move stays within one of them.
  if (contexts.every(inUnsampledTrace)) return context.with(first, fn);
  const traceIds = new Set(contexts.map((stored) => trace.getSpanContext(stored)!.traceId));
  const parent = traceIds.size === 1 ? first : ROOT_CONTEXT;
  const links =
    traceIds.size === 1 ? [] : contexts.slice(0, 32).map((stored) => ({ context: trace.getSpanContext(stored)! }));
  const span = tracer.startSpan(
    'outbox publish',
    {
      kind: SpanKind.PRODUCER,
      links,
      attributes: { 'messaging.system': 'bullmq', 'messaging.batch.message_count': events.length },
    },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), fn);
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    span.end();
  }
}

/**
 * BullMQ telemetry metadata for an event's job (the propagation carrier bullmq-otel reads), so the
 * worker's `process` span joins the event's trace: the active span when it belongs to that trace (the
 * publish span above), else the context stored with the event (the relay re-queuing, reconciliation).
 */
export function jobTraceMetadata(event: EventTraceContext): string | undefined {
  if (!tracingStarted()) return undefined;
  // An unsampled trace (flags 00, as our propagator wrote it) goes on as stored: no span of ours is in it.
  if (event.traceparent?.endsWith('-00')) {
    return JSON.stringify({
      traceparent: event.traceparent,
      ...(event.tracestate ? { tracestate: event.tracestate } : {}),
    });
  }
  const stored = storedContext(event);
  if (!stored) return undefined;
  const active = trace.getSpanContext(context.active());
  const source = active && active.traceId === trace.getSpanContext(stored)!.traceId ? context.active() : stored;
  const carrier: Record<string, string> = {};
  propagation.inject(source, carrier);
  return JSON.stringify(carrier);
}
