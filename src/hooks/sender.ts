import { EventEmitter } from 'node:events';
import { TextDecoder } from 'node:util';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { Agent, buildConnector, request } from 'undici';
import { ForbiddenTargetError, type TargetGuard } from '../shared/target-guard.js';
import { tracingStarted } from '../telemetry/state.js';
import type { Readable } from 'node:stream';

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * Why an attempt failed, as the deliveries log shows it (DECISIONS.md section 12.2): coarse on
 * purpose, never an address, a DNS answer or a system message. `http_status` is an answer that was
 * not 2xx (a 3xx included: redirects are not followed).
 */
export const DELIVERY_ERRORS = [
  'timeout',
  'connection_refused',
  'connection_reset',
  'dns_failure',
  'tls_error',
  'refused_target',
  'http_status',
] as const;
export type DeliveryError = (typeof DELIVERY_ERRORS)[number];

/** What came back: a status (any, including 3xx, which is never followed) or why nothing did. */
export type SendResult =
  | { kind: 'response'; statusCode: number; retryAfter?: string; durationMs: number; body?: string }
  | { kind: 'error'; error: Exclude<DeliveryError, 'http_status'>; durationMs: number };

const tracer = trace.getTracer('pipeline-records');

/** Receivers' answers are read only to free the connection for reuse; never more than this. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** The start of the answer kept for the deliveries log. */
export const KEPT_RESPONSE_BYTES = 1024;

/** Thrown by the connector when the target's name does not resolve (the resolver's own error may carry its answer). */
class UnresolvedTargetError extends Error {
  readonly code = 'ERR_UNRESOLVED_TARGET';
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME', 'ENODATA', 'ESERVFAIL']);
const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);
const TLS_CODE = /^ERR_(TLS|SSL)_|CERT|SELF_SIGNED|UNABLE_TO_VERIFY|^EPROTO$/;

/** The category of a failed request; the error itself (addresses, system text) goes nowhere. */
export function categorize(error: unknown): Exclude<DeliveryError, 'http_status'> {
  if (error instanceof ForbiddenTargetError) return 'refused_target';
  if (error instanceof UnresolvedTargetError) return 'dns_failure';
  const { name, code, cause } = (error ?? {}) as { name?: string; code?: string; cause?: unknown };
  if (name === 'TimeoutError' || name === 'AbortError' || (code && TIMEOUT_CODES.has(code))) return 'timeout';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code && DNS_CODES.has(code)) return 'dns_failure';
  if (code && TLS_CODE.test(code)) return 'tls_error';
  // undici wraps a socket's own error (UND_ERR_SOCKET with ECONNRESET as the cause).
  if (cause && cause !== error) return categorize(cause);
  return 'connection_reset'; // closed, reset or broken in any other way
}

/** What a request past HOOK_TIMEOUT_MS is aborted with (categorize: `timeout`). */
function timeoutError(): DOMException {
  return new DOMException('The request timed out', 'TimeoutError');
}

/**
 * The abort signal of one request: undici takes an EventEmitter as well as an AbortSignal, and an
 * emitter costs a fraction of an AbortController (whose EventTarget showed in the hooks worker's profile).
 */
class Deadline extends EventEmitter {
  aborted = false;
  reason: unknown;

  abort(reason: unknown): void {
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

/**
 * The first KEPT_RESPONSE_BYTES of an answer as text (a character cut in half is left out), draining up to
 * MAX_RESPONSE_BYTES; '' when reading fails. Read through its events rather than `for await`: most answers
 * are empty, and an async iterator and a decoder per delivery showed in the hooks worker's profile; an empty
 * answer costs its 'end' only.
 */
function readStart(body: Readable): Promise<string> {
  return new Promise((resolve) => {
    let decoder: TextDecoder | undefined;
    let text = '';
    let kept = 0;
    let read = 0;
    body.on('data', (chunk: Buffer) => {
      if (kept < KEPT_RESPONSE_BYTES) {
        const part = chunk.subarray(0, KEPT_RESPONSE_BYTES - kept);
        kept += part.length;
        decoder ??= new TextDecoder('utf-8');
        text += decoder.decode(part, { stream: true }); // stream: a split character is held back, never garbled
      }
      read += chunk.length;
      if (read > MAX_RESPONSE_BYTES) {
        body.destroy(); // the rest is not read: the connection is closed instead of reused
        resolve(text);
      }
    });
    body.on('end', () => resolve(text));
    body.on('error', () => resolve(''));
  });
}

/**
 * POSTs webhooks over one keep-alive undici Agent (connections are reused per origin). Its connector
 * resolves each host through the SSRF guard at connect time and connects to exactly the address it
 * checked, so a name that resolved to a public address at subscribe time and to 127.0.0.1 now is refused.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(
    guard: TargetGuard,
    private readonly timeoutMs: number,
  ) {
    const connect = buildConnector({ timeout: timeoutMs });
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      connections: 32,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // `host` (and so TLS SNI and certificate checks) keeps the original name; only the address is pinned.
      connect: (options, callback) => {
        guard.addressToConnect(options.hostname).then(
          (address) => connect({ ...options, hostname: address }, callback),
          (error: Error) =>
            callback(error instanceof ForbiddenTargetError ? error : new UnresolvedTargetError('unresolved'), null),
        );
      },
    });
  }

  /**
   * POSTs the webhook. While tracing, inside a client span of the active trace (the delivery job's),
   * made here rather than by an HTTP-client instrumentation: those also add `traceparent` to the
   * request, and a third party's receiver gets no trace ids of ours.
   */
  async send(webhook: WebhookRequest): Promise<SendResult> {
    const parent = tracingStarted() ? trace.getSpan(context.active()) : undefined;
    if (!parent?.isRecording()) return this.post(webhook);
    const url = new URL(webhook.url);
    const span = tracer.startSpan('POST', {
      kind: SpanKind.CLIENT,
      attributes: {
        'http.request.method': 'POST',
        'url.full': webhook.url,
        'server.address': url.hostname,
        'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
      },
    });
    try {
      const result = await this.post(webhook);
      if (result.kind === 'response') {
        span.setAttribute('http.response.status_code', result.statusCode);
        if (result.statusCode >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
      } else {
        span.setAttribute('error.type', result.error);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      return result;
    } finally {
      span.end();
    }
  }

  private async post(webhook: WebhookRequest): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    // A timer cleared once the answer is read, rather than AbortSignal.timeout: that one's timer runs
    // to its end and builds a DOMException for every request (seen in the hooks worker's profile).
    const deadline = new Deadline();
    const timer = setTimeout(() => deadline.abort(timeoutError()), this.timeoutMs);
    try {
      const response = await request(webhook.url, {
        dispatcher: this.agent,
        method: 'POST',
        headers: webhook.headers,
        body: webhook.body,
        signal: deadline,
      });
      // An answer cut short after its status still counts as that answer.
      const body = await readStart(response.body);
      const retryAfter = response.headers['retry-after'];
      return {
        kind: 'response',
        statusCode: response.statusCode,
        retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
        durationMs: elapsed(),
        body,
      };
    } catch (error) {
      return { kind: 'error', error: categorize(error), durationMs: elapsed() };
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
