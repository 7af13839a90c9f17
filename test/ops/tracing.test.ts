import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracing } from '../../src/telemetry/sdk.js';
import { REPO_ROOT } from '../helpers/compiled.js';
import { waitFor } from '../helpers/wait.js';
import type { TestApp } from '../helpers/app.js';
import type { Receiver as ReceiverType } from '../hooks/receiver.js';

// The SDK starts before the app's modules load (as the --import preload does in production), with an
// in-memory exporter; web, relay and worker roles run in this process but hand the trace on only
// through what they store: the trace context in the outbox and `events`, and the job's telemetry metadata.
// Roots are not sampled, as with production's 5% sampling for most requests: only a caller's sampled
// trace is recorded.
process.env.OTEL_TRACES_SAMPLER = 'parentbased_always_off';
const exporter = new InMemorySpanExporter();
await startTracing({
  serviceName: 'pipeline-records-test',
  spanProcessors: [new SimpleSpanProcessor({ exporter })],
});
const { buildTestApp, startTestWorkers } = await import('../helpers/app.js');
const { createTenant, ext } = await import('../helpers/fixtures.js');
const { Receiver } = await import('../hooks/receiver.js');

type Span = ReadableSpan;

let t: TestApp;
let workers: { close(): Promise<void> };
let inbox: ReceiverType;
beforeAll(async () => {
  // No fast-path publisher: the web process only records the event, the relay role publishes it.
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
  workers = await startTestWorkers(t.config, t.db, ['relay', 'automations', 'hooks']);
  inbox = await Receiver.start();
});
afterAll(async () => {
  await workers?.close();
  await t?.close();
  await inbox?.close();
});

const parentOf = (span: Span) => span.parentSpanContext?.spanId;

/** The span's ancestors, nearest first, within the spans exported so far. */
function ancestry(span: Span, spans: Span[]): Span[] {
  const chain: Span[] = [];
  for (let at = span; ;) {
    const parent = spans.find((candidate) => candidate.spanContext().spanId === parentOf(at));
    if (!parent) return chain;
    chain.push(parent);
    at = parent;
  }
}

/** A new company whose hook gets task.created. */
async function subscribedCompany() {
  const tenant = await createTenant(t.app);
  const hook = await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.created' });
  expect(hook.statusCode, hook.body).toBe(201);
  return tenant;
}

/** A task created in the company under the caller's `traceparent`. */
async function createTaskUnder(tenant: { key: string }, traceparent: string, title: string) {
  const created = await ext(
    t.app,
    tenant.key,
    'POST',
    '/tasks',
    { title, due_at: '2026-11-22T09:30:00Z' },
    { traceparent },
  );
  expect(created.statusCode, created.body).toBe(201);
  return created;
}

/** The webhook delivering `taskId`'s event, once the relay, the fan-out job and the POST have all run. */
async function deliveredWhenJobsEnded(taskId: string) {
  const delivered = await waitFor(
    () => inbox.requests.find((request) => JSON.parse(request.body).data?.task_id === taskId),
    20_000,
  );
  expect(delivered).toBeDefined();
  await new Promise((resolve) => setTimeout(resolve, 500)); // the jobs' last spans end after the POST
  return delivered!;
}

describe('one trace from the request to the webhook delivery', () => {
  it('follows a task creation through the outbox, the relay, the queue and the worker to the POST', async () => {
    const tenant = await subscribedCompany();
    // The caller's own trace: everything below must continue it.
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpanId = '00f067aa0ba902b7';
    await createTaskUnder(tenant, `00-${traceId}-${callerSpanId}-01`, 'Call back');

    // The whole chain has ended: the delivery POST and the fan-out job around it.
    const inTrace = () => exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === traceId);
    const ended = await waitFor(() => {
      const spans = inTrace();
      const fanOut = spans.find((span) => span.name === 'process hook-fanout');
      const post = spans.find((span) => span.kind === SpanKind.CLIENT && span.name === 'POST');
      return fanOut && post ? spans : undefined;
    }, 20_000);
    expect(
      ended,
      `spans of ${traceId}: ${inTrace()
        .map((span) => span.name)
        .join(', ')}`,
    ).toBeDefined();
    const spans = ended!;
    const one = (predicate: (span: Span) => boolean, what: string) => {
      const found = spans.filter(predicate);
      expect(found, `${what} among ${spans.map((span) => span.name).join(', ')}`).toHaveLength(1);
      return found[0]!;
    };

    // Web: the request span continues the caller's span, and its MongoDB write is inside it.
    const request = one((span) => span.name === 'POST /v1/ext/tasks', 'the request span');
    expect(request.kind).toBe(SpanKind.SERVER);
    expect(parentOf(request)).toBe(callerSpanId);
    expect(request.attributes['http.response.status_code']).toBe(201);
    const dbSystem = (span: Span) => span.attributes['db.system.name'] ?? span.attributes['db.system'];
    const inRequest = spans.filter((span) => ancestry(span, spans).includes(request));
    expect(inRequest.filter((span) => dbSystem(span) === 'mongodb').map((span) => span.name)).toContain('insert tasks');
    expect(inRequest.some((span) => dbSystem(span) === 'redis')).toBe(true); // the rate limit's script
    // A recorded MongoDB span shows the command's shape, never a value.
    const insert = inRequest.find((span) => span.name === 'insert tasks')!;
    const statement = String(insert.attributes['db.query.text'] ?? insert.attributes['db.statement']);
    expect(statement).toContain('"title":"?"');
    expect(statement).not.toContain('Call back');
    // The driver's document sequences (the events' insert, the outbox's update) are shown as their
    // documents, not with their serialized bytes one `?` each.
    const statements = spans
      .filter((span) => dbSystem(span) === 'mongodb')
      .map((span) => String(span.attributes['db.query.text']));
    expect(statements.some((text) => /"documents":\[\{"_id":"\?"/.test(text))).toBe(true);
    expect(statements.filter((text) => text.includes('chunks'))).toEqual([]);

    // BullMQ's housekeeping (each blocking fetch of the next job) is never recorded, in any trace.
    expect(exporter.getFinishedSpans().filter((span) => /^getNextJob|^moveStalledJobsToWait/.test(span.name))).toEqual(
      [],
    );

    // The move records the event in `events`, and the sequencer queues it, both in the request's trace.
    expect(
      ancestry(
        one((span) => span.name === 'outbox move', 'the move span'),
        spans,
      ),
    ).toContain(request);
    const publish = one((span) => span.name === 'outbox publish', 'the sequencer publish span');
    expect(publish.kind).toBe(SpanKind.PRODUCER);
    expect(ancestry(publish, spans)).toContain(request);
    const queued = spans.filter((span) => span.name.startsWith('addNode') && parentOf(span) !== undefined);
    expect(queued.map((span) => span.name).sort()).toEqual(['addNode automations', 'addNode hook-fanout']);
    for (const span of queued) expect(ancestry(span, spans)).toContain(publish);

    // Worker: each consumer's job runs in a span whose parent is the publish span (through the job's metadata).
    const fanOut = one((span) => span.name === 'process hook-fanout', 'the fan-out job span');
    expect(fanOut.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(fanOut)).toBe(publish.spanContext().spanId);
    const automations = one((span) => span.name === 'process automations', 'the automations job span');
    expect(parentOf(automations)).toBe(publish.spanContext().spanId);

    // Delivery: the POST to the receiver is a client span of the fan-out job.
    const post = one((span) => span.kind === SpanKind.CLIENT && span.name === 'POST', 'the delivery POST');
    expect(parentOf(post)).toBe(fanOut.spanContext().spanId);
    expect(post.attributes['url.full']).toBe(inbox.url());
    expect(post.attributes['http.response.status_code']).toBe(200);
    expect(post.resource.attributes['service.name']).toBe('pipeline-records-test');

    // The receiver's payload is the fixed contract: no trace context in it, nor in its headers (a third
    // party gets no trace ids of ours).
    const [delivered] = inbox.requests;
    expect(Object.keys(JSON.parse(delivered!.body)).sort()).toEqual([
      'actor',
      'company_id',
      'data',
      'event_id',
      'occurred_at',
      'sequence',
      'type',
    ]);
    expect(delivered!.headers.traceparent).toBeUndefined();
    expect(delivered!.headers.tracestate).toBeUndefined();
    expect(Object.keys(delivered!.headers).filter((name) => /trace|baggage/i.test(name))).toEqual([]);
    // ...while the stored event keeps it, so any later mover (reconciliation) continues the trace.
    const stored = await t.db.collection('events').findOne({ _id: delivered!.id as never });
    expect(stored?.event.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  });

  it('records nothing of an unsampled trace, and hands the decision on to the worker', async () => {
    const tenant = await subscribedCompany();
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const before = exporter.getFinishedSpans().length;
    const created = await createTaskUnder(tenant, `00-${traceId}-b7ad6b7169203331-00`, 'Unsampled');
    const taskId = JSON.parse(created.body).task_id as string;

    const delivered = await deliveredWhenJobsEnded(taskId);
    // Nothing at all: no span of that trace, and none that started a trace of its own on the way.
    const recorded = exporter
      .getFinishedSpans()
      .slice(before)
      .filter((span) => span.spanContext().traceId !== '4bf92f3577b34da6a3ce929d0e0e4736');
    expect(recorded.map((span) => `${span.name} ${span.spanContext().traceId}`)).toEqual([]);
    // The event keeps the caller's trace, not sampled, so whoever moves it on does not record it either.
    const stored = await t.db.collection('events').findOne({ _id: delivered.id as never });
    expect(stored?.event.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
  });
});

describe('a request the sampler does not record, without a caller’s trace', () => {
  it('records nothing in web, relay or worker, and its event carries no trace context on', async () => {
    const tenant = await subscribedCompany();
    const before = exporter.getFinishedSpans().length;
    const created = await ext(t.app, tenant.key, 'POST', '/tasks', {
      title: 'Unsampled, no caller',
      due_at: '2026-11-22T09:30:00Z',
    });
    expect(created.statusCode, created.body).toBe(201);
    const taskId = JSON.parse(created.body).task_id as string;
    const delivered = await deliveredWhenJobsEnded(taskId);
    // No span, and none that started a trace of its own on the way (a job's, a command's).
    const recorded = exporter.getFinishedSpans().slice(before);
    expect(recorded.map((span) => `${span.name} ${span.spanContext().traceId}`)).toEqual([]);
    const stored = await t.db.collection('events').findOne({ _id: delivered.id as never });
    expect(stored?.event.traceparent).toBeUndefined();
  });
});

describe('a publish coalescing a sampled request’s event with events of requests not traced', () => {
  it('is in that request’s trace, without their queueing', async () => {
    const { currentTraceContext, inPublishSpan } = await import('../../src/telemetry/events.js');
    const traceId = '5bf92f3577b34da6a3ce929d0e0e4737';
    const sampled = { traceparent: `00-${traceId}-00f067aa0ba902b7-01` };
    const unsampled = { traceparent: '00-6bf92f3577b34da6a3ce929d0e0e4738-00f067aa0ba902b7-00' };
    const activeTrace = async () => currentTraceContext().traceparent ?? '';
    // Alone, the work runs within the publish span, so the queue's spans are its children.
    expect(await inPublishSpan([sampled], activeTrace)).toContain(traceId);
    // Coalesced with others, the work runs outside any trace: none of their commands is recorded in it.
    expect(await inPublishSpan([sampled, {}, unsampled], activeTrace)).toBe('');
    const publishes = exporter
      .getFinishedSpans()
      .filter((span) => span.name === 'outbox publish' && span.spanContext().traceId === traceId);
    expect(publishes.map((span) => span.attributes['messaging.batch.message_count'])).toEqual([1, 3]);
  });
});

describe('tracing configuration', () => {
  it('refuses a malformed OTLP endpoint at start with one line', async () => {
    const { loadConfig } = await import('../../src/shared/config.js');
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(
      'Invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL',
    );
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).OTEL_EXPORTER_OTLP_ENDPOINT).toBe(
      'http://collector:4318',
    );
  });
});

describe('without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  const run = promisify(execFile);
  /** What the preload left behind in a fresh process: whether it started, and what it registered globally. */
  async function preloadOutcome(env: Record<string, string>) {
    const probe = `
      const { tracingStarted } = await import('./src/telemetry/state.js');
      const registered = globalThis[Symbol.for('opentelemetry.js.api.1')] ?? {};
      console.log(JSON.stringify({ started: tracingStarted(), registered: Object.keys(registered).filter((key) => key !== 'version').sort() }));`;
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', '--import', './src/telemetry/preload.ts', '--input-type=module', '-e', probe],
      { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '', ...env } },
    );
    return JSON.parse(stdout.trim().split('\n').at(-1)!) as { started: boolean; registered: string[] };
  }

  it('starts nothing: no SDK, no global tracer, propagator or context manager', async () => {
    expect(await preloadOutcome({})).toEqual({ started: false, registered: [] });
    expect(await preloadOutcome({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toEqual({ started: false, registered: [] });
  });

  it('starts the SDK when it is set (and not disabled)', async () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' };
    expect(await preloadOutcome(endpoint)).toEqual({
      started: true,
      registered: ['context', 'propagation', 'trace'],
    });
    expect(await preloadOutcome({ ...endpoint, OTEL_SDK_DISABLED: 'true' })).toEqual({
      started: false,
      registered: [],
    });
  });
});
