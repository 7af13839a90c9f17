import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { holdTraceContext, newTraceContext } from './state.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/** Not traced: probes and scrapes, several a minute each, carry no request of a user. */
const UNTRACED_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);

const tracer = trace.getTracer('pipeline-records');

interface RequestTrace {
  span?: Span;
  /** An error set the span's status, with its message. */
  failed?: boolean;
  ended?: boolean;
  release?: () => void;
}
const traces = new WeakMap<FastifyRequest, RequestTrace>();

/**
 * One SERVER span per request, named "METHOD /route", continuing the caller's `traceparent`. The
 * sampling decision is taken as the request starts, and only a request with a trace to follow enters
 * a context: a recorded one (its span is the parent of its MongoDB, Redis and queue spans), or one
 * whose caller sent an unsampled trace context (its events carry it on with flags 00, so the worker
 * does not record that trace either). Any other unsampled request, 95% of them at the recommended 5%,
 * runs with no context at all, and so with AsyncLocalStorage off (see context.ts).
 */
export function traceRequests(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.routeOptions.url;
    if (route !== undefined && UNTRACED_ROUTES.has(route)) return done();
    // No caller's trace: the root draw first, so an unrecorded new trace makes no span at all.
    const caller: Context | undefined = request.headers.traceparent
      ? propagation.extract(ROOT_CONTEXT, request.headers)
      : newTraceContext();
    if (caller === undefined) return done();
    const span = tracer.startSpan(
      route ? `${request.method} ${route}` : request.method,
      { kind: SpanKind.SERVER },
      caller,
    );
    let requestTrace: RequestTrace;
    if (span.isRecording()) {
      span.setAttributes({
        'http.request.method': request.method,
        'url.path': request.url.split('?', 1)[0],
        ...(route ? { 'http.route': route } : {}),
      });
      requestTrace = { span, release: holdTraceContext() };
    } else if (trace.getSpanContext(caller)) {
      requestTrace = { release: holdTraceContext() };
    } else {
      return done();
    }
    traces.set(request, requestTrace);
    // A client that goes away before the response gets no onResponse: the span ends (without a status
    // code) and the context is let go all the same.
    reply.raw.once('close', () => finish(requestTrace));
    context.with(trace.setSpan(caller, span), done);
  });

  app.addHook('onError', (request, _reply, error, done) => {
    const requestTrace = traces.get(request);
    if (requestTrace?.span) {
      requestTrace.span.recordException(error);
      requestTrace.span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
      requestTrace.failed = true;
    }
    done();
  });

  app.addHook('onResponse', (request, reply, done) => {
    const requestTrace = traces.get(request);
    if (requestTrace) finish(requestTrace, reply.statusCode);
    done();
  });
}

function finish(requestTrace: RequestTrace, statusCode?: number): void {
  if (requestTrace.ended) return;
  requestTrace.ended = true;
  const { span, failed, release } = requestTrace;
  if (span && statusCode !== undefined) {
    span.setAttribute('http.response.status_code', statusCode);
    if (statusCode >= 500 && !failed) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span?.end();
  release?.();
}
