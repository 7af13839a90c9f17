import { register } from 'node:module';
import { context, diag, DiagConsoleLogger, propagation, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import {
  CompositePropagator,
  diagLogLevelFromString,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { MongoDBInstrumentation } from '@opentelemetry/instrumentation-mongodb';
import {
  defaultResource,
  detectResources,
  envDetector,
  hostDetector,
  processDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import * as tracing from '@opentelemetry/sdk-trace';
import { BullMQOtel } from 'bullmq-otel';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { OnDemandContextManager } from './context.js';
import { markTracingStarted } from './state.js';
import { UnsampledTracePropagator, unsampledTrace, withinRecordedTraces } from './unsampled.js';
import type { Attributes, Context, Link, TextMapPropagator } from '@opentelemetry/api';

/** service.name unless OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) says otherwise. */
export function serviceNameFor(entryScript: string): string {
  return /workers[\\/]main\.[jt]s$/.test(entryScript) ? 'pipeline-records-worker' : 'pipeline-records-web';
}

/**
 * The configured sampler, but never a span started under an unsampled trace (its context holds no span,
 * see unsampled.ts, so the span would otherwise start a trace of its own).
 */
class ServiceSampler implements tracing.Sampler {
  constructor(private readonly sampler: tracing.Sampler) {}

  shouldSample(
    parent: Context,
    traceId: string,
    name: string,
    kind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): tracing.SamplingResult {
    if (unsampledTrace(parent)) return { decision: tracing.SamplingDecision.NOT_RECORD };
    return this.sampler.shouldSample(parent, traceId, name, kind, attributes, links);
  }

  toString(): string {
    return `ServiceSampler{${this.sampler.toString()}}`;
  }
}

/**
 * How the sampler decides a new trace (a request without a caller's trace context): all recorded, none, or
 * by its trace id (the ratio samplers, plain or as the root of a parent-based one).
 */
export type NewTraces = 'all' | 'none' | tracing.Sampler;

/** OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG as the SDK reads them (default parentbased_always_on). */
export function samplerFromEnv(env: NodeJS.ProcessEnv): { sampler: tracing.Sampler; newTraces: NewTraces } {
  const ratio = () => {
    const value = Number(env.OTEL_TRACES_SAMPLER_ARG);
    return env.OTEL_TRACES_SAMPLER_ARG !== undefined && value >= 0 && value <= 1 ? value : 1;
  };
  switch (env.OTEL_TRACES_SAMPLER?.trim()) {
    case 'always_on':
      return { sampler: new tracing.AlwaysOnSampler(), newTraces: 'all' };
    case 'always_off':
      return { sampler: new tracing.AlwaysOffSampler(), newTraces: 'none' };
    case 'traceidratio': {
      const byTraceId = new tracing.TraceIdRatioBasedSampler(ratio());
      return { sampler: byTraceId, newTraces: byTraceId };
    }
    case 'parentbased_always_off':
      return { sampler: new tracing.ParentBasedSampler({ root: new tracing.AlwaysOffSampler() }), newTraces: 'none' };
    case 'parentbased_traceidratio': {
      const byTraceId = new tracing.TraceIdRatioBasedSampler(ratio());
      return { sampler: new tracing.ParentBasedSampler({ root: byTraceId }), newTraces: byTraceId };
    }
    default:
      return { sampler: new tracing.ParentBasedSampler({ root: new tracing.AlwaysOnSampler() }), newTraces: 'all' };
  }
}

/**
 * The SDK's random ids, but the next trace id can be one drawn beforehand (see newTraceDrawn): the span
 * started right after gets it.
 */
export class DrawnTraceIds implements tracing.IdGenerator {
  private readonly random = new tracing.RandomIdGenerator();
  private next?: string;

  /** A fresh random trace id, for the SDK to use only if `use` is called with it. */
  draw(): string {
    return this.random.generateTraceId();
  }

  use(traceId: string): void {
    this.next = traceId;
  }

  generateTraceId(): string {
    const traceId = this.next ?? this.random.generateTraceId();
    this.next = undefined;
    return traceId;
  }

  generateSpanId(): string {
    return this.random.generateSpanId();
  }
}

/** What the root draw asks the sampler with, the same every request (nothing allocated per request). */
const NO_ATTRIBUTES: Attributes = Object.freeze({});
const NO_LINKS: Link[] = [];

/**
 * The root draw of a request without a caller's trace: the context to start its span in, or undefined
 * when the sampler would not record it, decided before the SDK makes anything. Most requests (95% at the
 * recommended 5%) then cost tracing nothing at all, where the SDK would make each of them a trace id, a
 * span id, a sampling decision and a non-recording span, work on every request for nothing. The decision
 * is the sampler's own, on a trace id drawn here that the request's span then gets: the same traces are
 * recorded as without the draw, and every service sampling by trace id agrees on them.
 */
export function newTraceDrawn(newTraces: NewTraces, ids: DrawnTraceIds): Context | undefined {
  if (newTraces === 'all') return ROOT_CONTEXT;
  if (newTraces === 'none') return undefined;
  const traceId = ids.draw();
  const { decision } = newTraces.shouldSample(ROOT_CONTEXT, traceId, '', SpanKind.SERVER, NO_ATTRIBUTES, NO_LINKS);
  if (decision !== tracing.SamplingDecision.RECORD_AND_SAMPLED) return undefined;
  ids.use(traceId);
  return ROOT_CONTEXT;
}

/**
 * `db.query.text` of a MongoDB span: the command's shape with every value replaced by `?` (as the
 * instrumentation's own default), serialized only when the span will be recorded. The instrumentation
 * builds its attributes before it starts the span, also under an unsampled request's span, and that
 * JSON.stringify of whole documents (a task with its outbox events) was most of what an unsampled
 * request paid for tracing. The active span here is the command's parent: recorded parent, recorded child.
 */
export function mongoStatement(command: Record<string, unknown>): string {
  if (!trace.getSpan(context.active())?.isRecording()) return '';
  return commandShape(command, []);
}

/**
 * The JSON of a value with `?` for every scalar, written directly: a JSON.stringify replacer called per
 * key cost several times more. Values with their own JSON form (dates, ObjectIds, binaries, buffers) are
 * one `?`, not the bytes of a buffer one `?` each, and the driver's document sequences (the `documents`
 * of an insert, the `updates` of an update, with their serialized chunks) are their documents: those
 * two would make a write's statement as large as what it writes, most of a sampled request's tracing cost.
 */
function commandShape(value: unknown, ancestors: object[]): string {
  if (typeof value !== 'object' || value === null || typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return '"?"';
  }
  if (ancestors.includes(value)) return '"[Circular]"';
  if (isDocumentSequence(value)) return commandShape(value.documents, ancestors);
  ancestors.push(value);
  const parts: string[] = [];
  if (Array.isArray(value)) {
    for (const element of value as unknown[]) parts.push(commandShape(element, ancestors));
  } else {
    for (const [key, field] of Object.entries(value)) {
      if (field === undefined || typeof field === 'function' || typeof field === 'symbol') continue;
      parts.push(`${JSON.stringify(key)}:${commandShape(field, ancestors)}`);
    }
  }
  ancestors.pop();
  return Array.isArray(value) ? `[${parts.join(',')}]` : `{${parts.join(',')}}`;
}

/** The driver's OP_MSG document sequence (mongodb's DocumentSequence: a field, its documents, their bytes). */
function isDocumentSequence(value: object): value is { documents: unknown[] } {
  const candidate = value as { field?: unknown; documents?: unknown; chunks?: unknown };
  return typeof candidate.field === 'string' && Array.isArray(candidate.documents) && Array.isArray(candidate.chunks);
}

type ConnectionCommand = (this: unknown, ...args: unknown[]) => Promise<unknown>;

/**
 * The MongoDB instrumentation (requireParentSpan), but a command without a span to be a child of goes
 * straight to the driver. Its own wrapper, before finding it makes no span, still built an end handler
 * and chained a `then` on every command's promise: most of what the instrumentation cost an unsampled
 * request. Through the instrumentation's (private) factory of the driver 6.4+ `Connection.command`
 * wrapper; should a later version rename it, commands take the instrumentation's own path again (the
 * tracing test checks their spans either way).
 */
export function mongoInstrumentation(): MongoDBInstrumentation {
  const instrumentation = new MongoDBInstrumentation({
    requireParentSpan: true,
    dbStatementSerializer: mongoStatement,
  });
  const internals = instrumentation as unknown as {
    _getV4PatchCommandPromise?: () => (original: ConnectionCommand) => ConnectionCommand;
  };
  const wrapperFor = internals._getV4PatchCommandPromise?.bind(instrumentation);
  if (wrapperFor) {
    internals._getV4PatchCommandPromise = () => (original) => {
      const instrumented = wrapperFor()(original);
      return function command(this: unknown, ...args: unknown[]) {
        return trace.getSpan(context.active()) ? instrumented.apply(this, args) : original.apply(this, args);
      };
    };
  }
  return instrumentation;
}

/** A comma-separated OTEL_* list, trimmed, without empty entries or repeats; undefined when unset or empty. */
function listFromEnv(env: NodeJS.ProcessEnv, name: string): string[] | undefined {
  const values = (env[name] ?? '')
    .split(',')
    .map((value) => value.trim())
    .filter(Boolean);
  return values.length > 0 ? [...new Set(values)] : undefined;
}

/** A positive OTEL_* number, or undefined (unset, or not a positive number: the default then applies). */
function positiveFromEnv(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const value = Number(env[name]?.trim() || Number.NaN);
  return value > 0 ? value : undefined;
}

/** A non-negative OTEL_* number (span limits: 0 allows none), or undefined. */
function countFromEnv(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const value = Number(env[name]?.trim() || Number.NaN);
  return value >= 0 ? value : undefined;
}

/**
 * OTEL_PROPAGATORS as the specification names them (default W3C trace context and baggage; `none`: no
 * propagator), also injecting unsampled traces' context. B3 is loaded only when asked for.
 */
export async function propagatorFromEnv(env: NodeJS.ProcessEnv): Promise<TextMapPropagator | null> {
  const names = listFromEnv(env, 'OTEL_PROPAGATORS') ?? ['tracecontext', 'baggage'];
  if (names.includes('none')) return null;
  const propagators: TextMapPropagator[] = [];
  for (const name of names) {
    if (name === 'tracecontext') propagators.push(new W3CTraceContextPropagator());
    else if (name === 'baggage') propagators.push(new W3CBaggagePropagator());
    else if (name === 'b3' || name === 'b3multi') {
      const { B3InjectEncoding, B3Propagator } = await import('@opentelemetry/propagator-b3');
      const injectEncoding = name === 'b3' ? B3InjectEncoding.SINGLE_HEADER : B3InjectEncoding.MULTI_HEADER;
      propagators.push(new B3Propagator({ injectEncoding }));
    } else diag.warn(`OTEL_PROPAGATORS: "${name}" is not available (tracecontext, baggage, b3, b3multi, none)`);
  }
  if (propagators.length === 0) return null;
  return new UnsampledTracePropagator(new CompositePropagator({ propagators }));
}

/**
 * How long a finished span waits for its batch's export unless OTEL_BSP_SCHEDULE_DELAY says otherwise
 * (the SDK's default is 5 s). At the sampling docs/operations.md recommends the 512-span batch takes
 * over a second to fill, and a span held that long outlives several young-generation collections
 * (copied, then promoted, then left to a full GC); exported within 100 ms it dies young, which costs the
 * garbage collector less on every sampled request. The cost: an export, one small POST, every 100 ms while
 * spans are waiting.
 */
export const SPAN_EXPORT_DELAY_MS = 100;

/** The batch span processor's options from OTEL_BSP_*, with the export delay above unless one is set. */
export function batchOptionsFromEnv(
  env: NodeJS.ProcessEnv,
): Omit<ConstructorParameters<typeof tracing.BatchSpanProcessor>[0], 'exporter'> {
  return {
    scheduledDelayMillis: positiveFromEnv(env, 'OTEL_BSP_SCHEDULE_DELAY') ?? SPAN_EXPORT_DELAY_MS,
    maxQueueSize: positiveFromEnv(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: positiveFromEnv(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
    exportTimeoutMillis: positiveFromEnv(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
  };
}

/** OTEL_SPAN_*_LIMIT and OTEL_ATTRIBUTE_*_LIMIT (the SDK's defaults otherwise). */
function spanLimitsFromEnv(env: NodeJS.ProcessEnv): tracing.SpanLimits {
  return {
    attributeCountLimit:
      countFromEnv(env, 'OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT') ?? countFromEnv(env, 'OTEL_ATTRIBUTE_COUNT_LIMIT'),
    attributeValueLengthLimit:
      countFromEnv(env, 'OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT') ??
      countFromEnv(env, 'OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT'),
    eventCountLimit: countFromEnv(env, 'OTEL_SPAN_EVENT_COUNT_LIMIT'),
    linkCountLimit: countFromEnv(env, 'OTEL_SPAN_LINK_COUNT_LIMIT'),
    attributePerEventCountLimit: countFromEnv(env, 'OTEL_SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT'),
    attributePerLinkCountLimit: countFromEnv(env, 'OTEL_SPAN_ATTRIBUTE_PER_LINK_COUNT_LIMIT'),
  };
}

export interface TracingOptions {
  /** Used when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names the service. */
  serviceName: string;
  /** Tests pass an in-memory exporter's processor; by default OTLP over http/protobuf, batched (OTEL_BSP_*). */
  spanProcessors?: tracing.SpanProcessor[];
  /** Register the ESM import hook (the preload does; a test that already loaded modules may not). */
  hookModules?: boolean;
}

/**
 * Starts OpenTelemetry tracing from its parts (traces only: Prometheus and pino cover metrics and logs):
 * the trace SDK with the OTLP http/protobuf exporter, the MongoDB and ioredis instrumentations, BullMQ's
 * own telemetry and our request spans (requests.ts, registered by the app); the standard OTEL_* variables
 * configure them. Not the NodeSDK: it loads every exporter of traces, metrics and logs (gRPC, Zipkin,
 * Prometheus) whatever is configured, several times the heap of these parts, and a process that only loaded
 * it pays for that on every request, started or not: a bigger heap for every collection to mark.
 */
export async function startTracing(options: TracingOptions, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let acknowledged: Promise<void> | undefined;
  if (options.hookModules !== false) {
    // ESM: import-in-the-middle wraps exactly the modules the instrumentations ask for.
    const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
    register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);
    acknowledged = waitForAllMessagesAcknowledged();
  }
  const logLevel = env.OTEL_LOG_LEVEL?.trim();
  if (logLevel) diag.setLogger(new DiagConsoleLogger(), { logLevel: diagLogLevelFromString(logLevel) });
  const named =
    Boolean(env.OTEL_SERVICE_NAME?.trim()) || /(^|,)\s*service\.name=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) over ours, as the NodeSDK merges them.
  const resource = defaultResource()
    .merge(named ? null : resourceFromAttributes({ 'service.name': options.serviceName }))
    .merge(detectResources({ detectors: [envDetector, processDetector, hostDetector] }));
  const { sampler, newTraces } = samplerFromEnv(env);
  const traceIds = new DrawnTraceIds();
  const provider = new tracing.TracerProvider({
    resource,
    sampler: new ServiceSampler(sampler),
    idGenerator: traceIds,
    spanLimits: spanLimitsFromEnv(env),
    // OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION are read by the exporter.
    spanProcessors: options.spanProcessors ?? [
      new tracing.BatchSpanProcessor({ exporter: new OTLPTraceExporter(), ...batchOptionsFromEnv(env) }),
    ],
  });
  const contextManager = new OnDemandContextManager();
  context.setGlobalContextManager(contextManager.enable());
  const propagator = await propagatorFromEnv(env);
  if (propagator) propagation.setGlobalPropagator(propagator);
  trace.setGlobalTracerProvider(provider);
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      // Only within a trace: the relay's and the workers' polling would otherwise be a trace each.
      mongoInstrumentation(),
      // Command names only: job data and cache entries hold tenants' records.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
      // No HTTP-client instrumentation: the only client requests are webhooks to third parties, and it
      // would add our `traceparent` to them. The sender makes their client spans (src/hooks/sender.ts).
    ],
  });
  await acknowledged;
  markTracingStarted({
    queueTelemetry: withinRecordedTraces(new BullMQOtel('pipeline-records')),
    holdContext: () => contextManager.hold(),
    newTrace: () => newTraceDrawn(newTraces, traceIds),
    shutdown: () => provider.shutdown(),
  });
}
