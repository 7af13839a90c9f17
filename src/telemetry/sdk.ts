import { register } from 'node:module';
import { context, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { MongoDBInstrumentation } from '@opentelemetry/instrumentation-mongodb';
import { core, NodeSDK, tracing } from '@opentelemetry/sdk-node';
// OTEL_PROPAGATORS as the SDK reads it (not exported from the package's index).
import { getPropagatorFromEnv } from '@opentelemetry/sdk-node/build/src/utils.js';
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
 * span id, a sampling decision and a non-recording span (about 1% of a create task's CPU). The decision
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
 * two made a sampled create-task's statements 10 KB, most of a sampled request's tracing cost.
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

/** OTEL_PROPAGATORS (default W3C trace context and baggage), also injecting unsampled traces' context. */
function unsampledAware(fromEnv: TextMapPropagator | null | undefined): TextMapPropagator | null {
  if (fromEnv === null) return null; // OTEL_PROPAGATORS=none
  return new UnsampledTracePropagator(
    fromEnv ??
      new core.CompositePropagator({
        propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
      }),
  );
}

/**
 * How long a finished span waits for its batch's export unless OTEL_BSP_SCHEDULE_DELAY says otherwise
 * (the SDK's default is 5 s). At the sampling docs/operations.md recommends the 512-span batch takes
 * over a second to fill, and a span held that long outlives several young-generation collections
 * (copied, then promoted, then left to a full GC); exported within 100 ms it dies young. Create task at a
 * fixed 1,000 req/s, 5% sampled, CPU per request against tracing off: 1.05, 1.11, 1.29, 1.11x with this
 * delay, 1.13-1.33x (mean 1.23, eight runs) with 5 s; the runs spread about ±0.1, so the gain is likely, not
 * proven (docs/benchmarks.md). The cost: an export, one small POST, every 100 ms while spans are waiting.
 */
export const SPAN_EXPORT_DELAY_MS = 100;

/** The batch span processor's options: the export delay above unless the environment sets one (OTEL_BSP_*). */
export function batchOptionsFromEnv(env: NodeJS.ProcessEnv): tracing.BufferConfig {
  return env.OTEL_BSP_SCHEDULE_DELAY?.trim() ? {} : { scheduledDelayMillis: SPAN_EXPORT_DELAY_MS };
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
 * Starts the OpenTelemetry Node SDK: traces only (OTEL_METRICS_EXPORTER and OTEL_LOGS_EXPORTER default
 * to none here: Prometheus and pino already cover those), with the MongoDB and ioredis instrumentations,
 * BullMQ's own telemetry and our request spans (requests.ts, registered by the app). The standard
 * OTEL_* variables configure the rest.
 */
export async function startTracing(options: TracingOptions, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let acknowledged: Promise<void> | undefined;
  if (options.hookModules !== false) {
    // ESM: import-in-the-middle wraps exactly the modules the instrumentations ask for.
    const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
    register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);
    acknowledged = waitForAllMessagesAcknowledged();
  }
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  const named =
    Boolean(env.OTEL_SERVICE_NAME?.trim()) || /(^|,)\s*service\.name=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const contextManager = new OnDemandContextManager();
  const { sampler, newTraces } = samplerFromEnv(env);
  const traceIds = new DrawnTraceIds();
  const sdk = new NodeSDK({
    ...(named ? {} : { serviceName: options.serviceName }),
    sampler: new ServiceSampler(sampler),
    idGenerator: traceIds,
    contextManager,
    textMapPropagator: unsampledAware(getPropagatorFromEnv()),
    // OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION are read by the exporter.
    // Batched (OTEL_BSP_*; the other settings fall back to the environment) unless a test brings its own processor.
    spanProcessors: [
      ...(options.spanProcessors ?? [
        new tracing.BatchSpanProcessor(new OTLPTraceExporter(), batchOptionsFromEnv(env)),
      ]),
    ],
    instrumentations: [
      // Only within a trace: the relay's and the workers' polling would otherwise be a trace each.
      mongoInstrumentation(),
      // Command names only: job data and cache entries hold tenants' records.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
      // No HTTP-client instrumentation: the only client requests are webhooks to third parties, and it
      // would add our `traceparent` to them. The sender makes their client spans (src/hooks/sender.ts).
    ],
  });
  sdk.start();
  await acknowledged;
  markTracingStarted({
    queueTelemetry: withinRecordedTraces(new BullMQOtel('pipeline-records')),
    holdContext: () => contextManager.hold(),
    newTrace: () => newTraceDrawn(newTraces, traceIds),
    shutdown: () => sdk.shutdown(),
  });
}
