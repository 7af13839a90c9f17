import {
  context as activeContext,
  createContextKey,
  isSpanContextValid,
  trace,
  TraceFlags,
  type Context,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';
import type { Span as QueueSpan, Telemetry } from 'bullmq';

/**
 * Work under a trace the sampler did not record (95% of requests at the recommended 5% sampling) runs
 * with no span in its context, only this key holding the trace's context (the context manager in
 * sdk.ts enters contexts through withoutUnsampledSpan). The MongoDB and ioredis instrumentations
 * (requireParentSpan) then make no span per command at all, instead of a non-recording one with its
 * attributes, ids and sampling decision; the propagator below still hands the unsampled trace context
 * on (events, jobs), so the worker does not record that trace either. Only @opentelemetry/api here:
 * the event code imports this module also when not tracing.
 */
const UNSAMPLED_TRACE = createContextKey('pipeline-records unsampled trace');

/** The trace context of an unsampled trace the context stands in, if any. */
export function unsampledTrace(context: Context): SpanContext | undefined {
  return context.getValue(UNSAMPLED_TRACE) as SpanContext | undefined;
}

/**
 * Whether a span started in this context goes unrecorded: it is within an unsampled trace (entered as
 * below, or an unsampled span or remote parent not entered yet). Parent-based sampling, the default and
 * what docs/operations.md recommends, never records a child of an unsampled parent.
 */
export function inUnsampledTrace(context: Context): boolean {
  if (unsampledTrace(context)) return true;
  const spanContext = trace.getSpanContext(context);
  return spanContext !== undefined && !(spanContext.traceFlags & TraceFlags.SAMPLED) && isSpanContextValid(spanContext);
}

/** The context as entered: an unsampled span is replaced by its trace context under UNSAMPLED_TRACE. */
export function withoutUnsampledSpan(context: Context): Context {
  const span = trace.getSpan(context);
  if (!span) return context;
  const spanContext = span.spanContext();
  if (spanContext.traceFlags & TraceFlags.SAMPLED || !isSpanContextValid(spanContext)) return context;
  return trace.deleteSpan(context).setValue(UNSAMPLED_TRACE, spanContext);
}

/** Injects an unsampled trace's context as its span would have been (flags 00); otherwise the given propagator. */
export class UnsampledTracePropagator implements TextMapPropagator {
  constructor(private readonly propagator: TextMapPropagator) {}

  inject(context: Context, carrier: unknown, setter: TextMapSetter): void {
    const unsampled = unsampledTrace(context);
    this.propagator.inject(unsampled ? trace.setSpanContext(context, unsampled) : context, carrier, setter);
  }

  extract(context: Context, carrier: unknown, getter: TextMapGetter): Context {
    return this.propagator.extract(context, carrier, getter);
  }

  fields(): string[] {
    return this.propagator.fields();
  }
}

const UNRECORDED_QUEUE_SPAN: QueueSpan<Context> = {
  setSpanOnContext: (context) => context,
  setAttribute: () => {},
  setAttributes: () => {},
  addEvent: () => {},
  recordException: () => {},
  end: () => {},
};

/** Whether a span started in this context would have a recorded parent (local or the caller's, sampled). */
function inRecordedTrace(context: Context): boolean {
  const spanContext = trace.getSpanContext(context);
  return (
    spanContext !== undefined && Boolean(spanContext.traceFlags & TraceFlags.SAMPLED) && isSpanContextValid(spanContext)
  );
}

/**
 * BullMQ's telemetry (bullmq-otel), but its spans (a job's add, the worker's process and complete, its
 * housekeeping: each blocking fetch of the next job, stalled-job checks) are started only within a
 * recorded trace: under a recorded span, or for a job whose stored trace context is sampled. Otherwise
 * the context passes on unchanged: a job added within an unsampled trace carries it on (see
 * jobTraceMetadata), and the worker records neither that nor a job that carries no trace.
 */
export function withinRecordedTraces(telemetry: Telemetry<Context>): Telemetry<Context> {
  const { tracer, contextManager } = telemetry;
  return {
    ...telemetry,
    tracer: {
      startSpan: (name, options, context) =>
        inRecordedTrace(context ?? activeContext.active())
          ? tracer.startSpan(name, options, context)
          : UNRECORDED_QUEUE_SPAN,
    },
    contextManager: {
      active: () => contextManager.active(),
      with: (context, fn) => contextManager.with(context, fn),
      fromMetadata: (active, metadata) => contextManager.fromMetadata(active, metadata),
      // Nothing to carry outside a recorded trace: no metadata (BullMQ stores none with the job) rather
      // than "{}" on every job. An event's job gets its stored context from jobTraceMetadata all the same.
      getMetadata: (context) => (inRecordedTrace(context) ? contextManager.getMetadata(context) : ''),
    },
  };
}
