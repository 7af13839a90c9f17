import { context, ROOT_CONTEXT, SpanKind, trace, type Span } from '@opentelemetry/api';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { describe, expect, it, vi } from 'vitest';
import {
  batchOptionsFromEnv,
  DrawnTraceIds,
  mongoInstrumentation,
  mongoStatement,
  newTraceDrawn,
  propagatorFromEnv,
  samplerFromEnv,
  SPAN_EXPORT_DELAY_MS,
} from './sdk.js';

const command = { insert: 'tasks', documents: [{ _id: 'tsk_1', title: 'Call back', pending_events: [{ n: 1 }] }] };

describe('the MongoDB statement of a span', () => {
  it('is not built when the span will not be recorded (no parent, or an unsampled one)', () => {
    expect(mongoStatement(command)).toBe('');
    const unsampled = trace.wrapSpanContext({ traceId: '1'.repeat(32), spanId: '2'.repeat(16), traceFlags: 0 });
    expect(withActive(unsampled, () => mongoStatement(command))).toBe('');
  });

  it('is the command shape without any value under a recorded span', () => {
    const statement = statementUnderRecordedSpan(command);
    expect(JSON.parse(statement)).toEqual({
      insert: '?',
      documents: [{ _id: '?', title: '?', pending_events: [{ n: '?' }] }],
    });
  });

  it('is one `?` for a value with its own JSON form (a date, a buffer), never its bytes', () => {
    const withValues = { find: 'tasks', filter: { due_at: new Date(0) }, lsid: { id: Buffer.alloc(16) } };
    expect(JSON.parse(statementUnderRecordedSpan(withValues))).toEqual({
      find: '?',
      filter: { due_at: '?' },
      lsid: { id: '?' },
    });
  });
});

function statementUnderRecordedSpan(command: Record<string, unknown>): string {
  const sampled = trace.wrapSpanContext({ traceId: '1'.repeat(32), spanId: '2'.repeat(16), traceFlags: 1 });
  // What the SDK's span answers while it records (the API alone makes only non-recording spans).
  const recording = new Proxy(sampled, {
    get: (target, key) => (key === 'isRecording' ? () => true : Reflect.get(target, key)),
  });
  return withActive(recording, () => mongoStatement(command));
}

/** Runs `fn` with `span` active, whatever context manager is installed (none in unit tests). */
function withActive<T>(span: Span, fn: () => T): T {
  const spanContext = trace.setSpan(context.active(), span);
  const active = vi.spyOn(context, 'active').mockReturnValue(spanContext);
  try {
    return fn();
  } finally {
    active.mockRestore();
  }
}

describe('the batch span processor', () => {
  it('exports finished spans after SPAN_EXPORT_DELAY_MS (not the SDK default of 5 s) unless OTEL_BSP_SCHEDULE_DELAY is set', () => {
    expect(SPAN_EXPORT_DELAY_MS).toBeLessThan(5_000);
    expect(batchOptionsFromEnv({})).toEqual({ scheduledDelayMillis: SPAN_EXPORT_DELAY_MS });
    expect(batchOptionsFromEnv({ OTEL_BSP_SCHEDULE_DELAY: ' ' })).toEqual({
      scheduledDelayMillis: SPAN_EXPORT_DELAY_MS,
    });
    expect(batchOptionsFromEnv({ OTEL_BSP_SCHEDULE_DELAY: '5000' })).toEqual({ scheduledDelayMillis: 5000 });
  });

  it('takes the other OTEL_BSP_* settings from the environment, ignoring what is not a positive number', () => {
    expect(
      batchOptionsFromEnv({
        OTEL_BSP_MAX_QUEUE_SIZE: '4096',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '256',
        OTEL_BSP_EXPORT_TIMEOUT: '10000',
      }),
    ).toEqual({
      scheduledDelayMillis: SPAN_EXPORT_DELAY_MS,
      maxQueueSize: 4096,
      maxExportBatchSize: 256,
      exportTimeoutMillis: 10_000,
    });
    expect(batchOptionsFromEnv({ OTEL_BSP_MAX_QUEUE_SIZE: '-1', OTEL_BSP_SCHEDULE_DELAY: 'soon' })).toEqual({
      scheduledDelayMillis: SPAN_EXPORT_DELAY_MS,
    });
  });
});

describe('the root draw of a request without a caller’s trace', () => {
  it('is the sampler’s own decision on a trace id that the request’s span then gets', () => {
    const { sampler, newTraces } = samplerFromEnv({
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.3',
    });
    const ids = new DrawnTraceIds();
    const tracer = new TracerProvider({ sampler, idGenerator: ids }).getTracer('draw');
    const drawnIds: string[] = [];
    const draw = ids.draw.bind(ids);
    vi.spyOn(ids, 'draw').mockImplementation(() => {
      drawnIds.push(draw());
      return drawnIds.at(-1)!;
    });
    let recorded = 0;
    for (let i = 0; i < 400; i++) {
      const drawn = newTraceDrawn(newTraces, ids);
      if (!drawn) continue;
      const span = tracer.startSpan('GET /x', { kind: SpanKind.SERVER }, drawn);
      // Recorded by the SDK with the very id drawn: every service sampling by trace id agrees on it.
      expect(span.isRecording()).toBe(true);
      expect(span.spanContext().traceId).toBe(drawnIds.at(-1));
      span.end();
      recorded++;
    }
    expect(drawnIds).toHaveLength(400);
    expect(recorded).toBeGreaterThan(60);
    expect(recorded).toBeLessThan(180);
  });

  it('makes no span where the sampler records no new trace, and leaves all of them to the SDK where it records all', () => {
    const ids = new DrawnTraceIds();
    for (const env of [{ OTEL_TRACES_SAMPLER: 'always_off' }, { OTEL_TRACES_SAMPLER: 'parentbased_always_off' }]) {
      expect(newTraceDrawn(samplerFromEnv(env).newTraces, ids)).toBeUndefined();
    }
    for (const env of [{}, { OTEL_TRACES_SAMPLER: 'always_on' }]) {
      expect(newTraceDrawn(samplerFromEnv(env).newTraces, ids)).toBe(ROOT_CONTEXT);
    }
    // Plain traceidratio decides by the trace id too (every span, so the children agree with the root).
    const { newTraces } = samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' });
    expect(newTraceDrawn(newTraces, ids)).toBeUndefined();
  });

  it('hands a drawn id to the next trace only', () => {
    const ids = new DrawnTraceIds();
    ids.use('a'.repeat(32));
    expect(ids.generateTraceId()).toBe('a'.repeat(32));
    expect(ids.generateTraceId()).not.toBe('a'.repeat(32));
    expect(ids.generateTraceId()).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe('the MongoDB instrumentation', () => {
  it('patches the driver’s Connection.command so that a command outside any span goes straight to it', () => {
    const instrumentation = mongoInstrumentation();
    const file = instrumentation
      .getModuleDefinitions()
      .flatMap((definition) => definition.files)
      .find(
        (candidate) =>
          candidate.name === 'mongodb/lib/cmap/connection.js' && candidate.supportedVersions.includes('>=6.4.0 <8'),
      );
    expect(file, 'the instrumentation still patches the driver 6.4+ Connection.command').toBeDefined();
    const reply = Promise.resolve({ ok: 1 });
    const then = vi.spyOn(reply, 'then');
    let calls = 0;
    class Connection {
      id = 1;
      // Not vi.fn: a mock chains its own `then` on a returned promise (to record how it settled).
      command(): Promise<unknown> {
        calls++;
        return reply;
      }
    }
    const driver = { Connection };
    file!.patch?.(driver, '7.0.0');
    const patched = Object.getOwnPropertyDescriptor(Connection.prototype, 'command')?.value as { __wrapped?: boolean };
    expect(patched.__wrapped).toBe(true);
    expect(new Connection().command()).toBe(reply);
    expect(calls).toBe(1);
    // The instrumentation's own wrapper would have chained an end handler on the reply.
    expect(then).not.toHaveBeenCalled();
    instrumentation.disable();
  });
});

describe('the propagator', () => {
  const sampled = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: 'a'.repeat(32),
    spanId: 'b'.repeat(16),
    traceFlags: 1,
  });
  const injected = async (env: NodeJS.ProcessEnv) => {
    const carrier: Record<string, string> = {};
    (await propagatorFromEnv(env))?.inject(sampled, carrier, { set: (into, key, value) => (into[key] = value) });
    return carrier;
  };

  it('is W3C trace context (and baggage) unless OTEL_PROPAGATORS says otherwise', async () => {
    expect(await injected({})).toEqual({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` });
    expect(await injected({ OTEL_PROPAGATORS: ' ' })).toHaveProperty('traceparent');
  });

  it('is B3 (single or multiple headers) when asked for, and none at all with `none`', async () => {
    expect(await injected({ OTEL_PROPAGATORS: 'b3' })).toEqual({ b3: `${'a'.repeat(32)}-${'b'.repeat(16)}-1` });
    expect(Object.keys(await injected({ OTEL_PROPAGATORS: 'b3multi,tracecontext' })).sort()).toEqual([
      'traceparent',
      'x-b3-sampled',
      'x-b3-spanid',
      'x-b3-traceid',
    ]);
    expect(await propagatorFromEnv({ OTEL_PROPAGATORS: 'tracecontext,none' })).toBeNull();
    expect(await propagatorFromEnv({ OTEL_PROPAGATORS: 'xray' })).toBeNull();
  });
});
