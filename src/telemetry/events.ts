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
  const active = context.active();
  // Most requests: not sampled, and no caller's trace to carry on (see requests.ts).
  if (active === ROOT_CONTEXT) return {};
  const carrier: EventTraceContext = {};
  propagation.inject(active, carrier);
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
 * the events (the usual batch from the relay: one request's), with the queue's spans below it. A batch
 * that mixes traces (the web process coalesces concurrent requests' events; events without a stored
 * trace context count as traces of their own) gets the span in the first sampled trace, linked to the
 * other sampled ones (at most 32), but runs outside it: a sampled request's trace never records the
 * queueing of other requests' events, tens of spans per batch. Their jobs carry each event's own context.
 */
export async function inPublishSpan<T>(
  events: EventTraceContext[],
  fn: () => Promise<T>,
  /** `outbox publish` (the sequencer's hand-over to the queues) or `outbox move` (outbox to `events`). */
  name: 'outbox publish' | 'outbox move' = 'outbox publish',
): Promise<T> {
  if (!tracingStarted()) return fn();
  const sampled = events
    .map(storedContext)
    .filter((stored): stored is Context => stored !== undefined && !inUnsampledTrace(stored));
  const first = sampled[0];
  // No sampled trace: no span to make, nor any under it (the MongoDB and Redis commands need a parent
  // span, the queue's spans a recorded trace). Run outside whatever context is active, though: a
  // coalesced publish may have been scheduled from within a sampled request, whose span would otherwise
  // adopt this batch's commands. (Usually the root context is the active one: nothing is entered then.)
  if (!first) return context.with(ROOT_CONTEXT, fn);
  const traceId = trace.getSpanContext(first)!.traceId;
  const oneTrace =
    sampled.length === events.length && sampled.every((stored) => trace.getSpanContext(stored)!.traceId === traceId);
  const links = oneTrace
    ? []
    : sampled
        .slice(1, 33)
        .filter((stored) => trace.getSpanContext(stored)!.traceId !== traceId)
        .map((stored) => ({ context: trace.getSpanContext(stored)! }));
  const span = tracer.startSpan(
    name,
    {
      kind: SpanKind.PRODUCER,
      links,
      attributes: { 'messaging.system': 'bullmq', 'messaging.batch.message_count': events.length },
    },
    first,
  );
  try {
    return await context.with(oneTrace ? trace.setSpan(first, span) : ROOT_CONTEXT, fn);
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

/**
 * Runs one event of a batch job in that event's trace: within the job's `process` span when the job
 * continues the event's trace, else under the context stored with the event (none: a trace of its own),
 * so one request's webhooks never land in another request's trace.
 */
export function inEventTrace<T>(event: EventTraceContext, fn: () => Promise<T>): Promise<T> {
  if (!tracingStarted()) return fn();
  const stored = storedContext(event);
  const active = trace.getSpanContext(context.active());
  if (stored && active && active.traceId === trace.getSpanContext(stored)!.traceId) return fn();
  return context.with(stored ?? ROOT_CONTEXT, fn);
}
