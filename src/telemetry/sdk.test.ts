import { context, ROOT_CONTEXT, trace, type Span } from '@opentelemetry/api';
import { describe, expect, it, vi } from 'vitest';
import {
  batchOptionsFromEnv,
  mongoInstrumentation,
  mongoStatement,
  newTraceDrawn,
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
    // The operator's setting is left for the SDK to read, like the other OTEL_BSP_* variables.
    expect(batchOptionsFromEnv({ OTEL_BSP_SCHEDULE_DELAY: '5000' })).toEqual({});
  });
});

describe('the root draw of a request without a caller’s trace', () => {
  it('draws by the ratio of the parent-based ratio sampler, and records nothing under always_off', () => {
    const sampled = { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.05' };
    expect(samplerFromEnv(sampled).newTraceRatio).toBe(0.05);
    expect(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }).newTraceRatio).toBe(0);
    expect(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'always_off' }).newTraceRatio).toBe(0);
    expect(newTraceDrawn(0.05, () => 0.5)).toBeUndefined();
    expect(newTraceDrawn(0, () => 0)).toBeUndefined();
    // A drawn trace is recorded by the service's sampler whatever the configured one would say of its id.
    const drawn = newTraceDrawn(0.05, () => 0.01);
    expect(drawn).toBeDefined();
    expect(drawn).not.toBe(ROOT_CONTEXT);
  });

  it('leaves new traces to the SDK where the sampler decides by more than a share of them', () => {
    // always_on records all; plain traceidratio decides every span again by its trace id.
    for (const env of [{}, { OTEL_TRACES_SAMPLER: 'always_on' }, { OTEL_TRACES_SAMPLER: 'traceidratio' }]) {
      expect(samplerFromEnv(env).newTraceRatio).toBeUndefined();
    }
    expect(newTraceDrawn(undefined, () => 0.99)).toBe(ROOT_CONTEXT);
  });
});

describe('the MongoDB instrumentation', () => {
  it('hands a command outside any span straight to the driver: no handler chained on its promise', async () => {
    const instrumentation = mongoInstrumentation();
    const factory = (
      instrumentation as unknown as {
        _getV4PatchCommandPromise: () => (
          original: () => Promise<unknown>,
        ) => (this: unknown, ...args: unknown[]) => unknown;
      }
    )._getV4PatchCommandPromise;
    // Our override is in place (a rename in a later version of the instrumentation would lose it).
    expect(Object.hasOwn(instrumentation, '_getV4PatchCommandPromise')).toBe(true);
    const reply = Promise.resolve({ ok: 1 });
    const then = vi.spyOn(reply, 'then');
    let calls = 0;
    // Not vi.fn: a mock chains its own `then` on a returned promise (to record how it settled).
    const original = () => {
      calls++;
      return reply;
    };
    const wrapped = factory()(original);
    expect(wrapped.call({ id: 1 }, 'db.tasks', { find: 'tasks' }, {})).toBe(reply);
    expect(calls).toBe(1);
    expect(then).not.toHaveBeenCalled();
    instrumentation.disable();
  });
});
