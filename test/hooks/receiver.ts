import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../../src/contracts/envelope.js';
import { webhookPayloadSchema } from '../../src/hooks/payloads.js';
import type { AddressInfo } from 'node:net';

const ENVELOPE_KEYS = new Set([
  'event_id',
  'type',
  'company_id',
  'occurred_at',
  'sequence',
  'actor',
  'data',
  'changes',
]);

/**
 * Why a delivered body does not match its event type's payload schema (the one the OpenAPI
 * `webhooks` declare), or undefined when it does. Every request a Receiver gets is judged.
 */
export function payloadViolation(body: string): string | undefined {
  let payload: unknown;
  try {
    payload = JSON.parse(body);
  } catch {
    return 'the body is not JSON';
  }
  if (!payload || typeof payload !== 'object') return 'the body is not a JSON object';
  const { type } = payload as { type?: unknown };
  if (!(WEBHOOK_EVENT_TYPES as readonly unknown[]).includes(type)) return `unknown event type ${String(type)}`;
  const extra = Object.keys(payload).filter((key) => !ENVELOPE_KEYS.has(key));
  if (extra.length > 0) return `${String(type)}: undeclared envelope keys ${extra.join(', ')}`;
  const parsed = webhookPayloadSchema(type as WebhookEventType).safeParse(payload);
  if (parsed.success) return undefined;
  return `${String(type)}: ${parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`).join('; ')}`;
}

export interface Received {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
  /** The sender's port: the same for requests that reused one keep-alive connection. */
  remotePort?: number;
}

/** How to answer the nth request (0-based): a status, a status with headers, or never. */
export type Answer =
  number | { status: number; headers?: Record<string, string>; delayMs?: number; body?: string } | 'hang' | 'reset';

/** A real HTTP webhook receiver on 127.0.0.1 that records every request. */
export class Receiver {
  readonly requests: Received[] = [];
  /** Bodies that do not match their event type's payload schema; `close()` fails when there are any. */
  readonly violations: string[] = [];
  answer: (request: Received, index: number) => Answer = () => 200;
  private readonly hanging = new Set<ServerResponse>();

  private constructor(private readonly server: Server) {}

  static async start(answer?: Receiver['answer']): Promise<Receiver> {
    const receiver: Receiver = new Receiver(
      createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          const received = {
            id: String(req.headers['webhook-id']),
            headers: req.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            at: Date.now(),
            remotePort: req.socket.remotePort,
          };
          const index = receiver.requests.push(received) - 1;
          const violation = payloadViolation(received.body);
          if (violation) receiver.violations.push(violation);
          const answer = receiver.answer(received, index);
          if (answer === 'hang') return void receiver.hanging.add(res);
          if (answer === 'reset') return void req.socket.resetAndDestroy();
          const { status, headers = {}, delayMs = 0, body } = typeof answer === 'number' ? { status: answer } : answer;
          setTimeout(() => res.writeHead(status, headers).end(body), delayMs);
        });
      }),
    );
    if (answer) receiver.answer = answer;
    await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Requests per webhook-id. */
  counts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const request of this.requests) counts.set(request.id, (counts.get(request.id) ?? 0) + 1);
    return counts;
  }

  /** Stops the server; throws when any body it received did not match its event type's schema. */
  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
    if (this.violations.length > 0)
      throw new Error(`webhook bodies that do not match their schema: ${this.violations.slice(0, 5).join(' | ')}`);
  }
}

/** Verifies a received request the way a receiver would, with the standardwebhooks library; returns the payload. */
export function verifyWebhook(secret: string, request: Received): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  });
}
