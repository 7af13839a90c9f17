import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import type { AddressInfo } from 'node:net';

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

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
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
