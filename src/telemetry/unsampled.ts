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

/**
 * BullMQ's telemetry (bullmq-otel), but within an unsampled trace its spans (a job's add, the worker's
 * process and complete) are not started at all: the context passes on unchanged, so the job still
 * carries the unsampled trace and the worker does not record it either.
 */
export function skippingUnsampled(telemetry: Telemetry<Context>): Telemetry<Context> {
  const { tracer } = telemetry;
  return {
    ...telemetry,
    tracer: {
      startSpan: (name, options, context) =>
        inUnsampledTrace(context ?? activeContext.active())
          ? UNRECORDED_QUEUE_SPAN
          : tracer.startSpan(name, options, context),
    },
  };
}
