import { ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api';
import { SpanKind, type Telemetry } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { withinRecordedTraces } from './unsampled.js';

const remote = (traceFlags: number) =>
  trace.setSpanContext(ROOT_CONTEXT, { traceId: '1'.repeat(32), spanId: '2'.repeat(16), traceFlags, isRemote: true });

describe("BullMQ's spans", () => {
  it('are started only within a recorded trace: never for a job without one, nor in an unsampled one', () => {
    const started: string[] = [];
    const telemetry = withinRecordedTraces({
      tracer: { startSpan: (name: string) => (started.push(name), {}) },
      contextManager: { active: () => ROOT_CONTEXT },
    } as unknown as Telemetry<Context>);
    telemetry.tracer.startSpan('getNextJob', { kind: SpanKind.INTERNAL }); // housekeeping, outside any trace
    telemetry.tracer.startSpan('process hook-fanout', { kind: SpanKind.CONSUMER }, remote(0)); // a job of an unsampled trace
    telemetry.tracer.startSpan('process automations', { kind: SpanKind.CONSUMER }, remote(1)); // a job of a sampled trace
    expect(started).toEqual(['process automations']);
  });

  it('hand no trace metadata to a job added outside a recorded trace', () => {
    const telemetry = withinRecordedTraces({
      tracer: { startSpan: () => ({}) },
      contextManager: { getMetadata: () => '{"traceparent":"…"}' },
    } as unknown as Telemetry<Context>);
    expect(telemetry.contextManager.getMetadata(ROOT_CONTEXT)).toBe('');
    expect(telemetry.contextManager.getMetadata(remote(0))).toBe('');
    expect(telemetry.contextManager.getMetadata(remote(1))).toBe('{"traceparent":"…"}');
  });
});
