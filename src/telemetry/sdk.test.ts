import { context, trace, type Span } from '@opentelemetry/api';
import { describe, expect, it, vi } from 'vitest';
import { batchOptionsFromEnv, mongoStatement, SPAN_EXPORT_DELAY_MS } from './sdk.js';

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
