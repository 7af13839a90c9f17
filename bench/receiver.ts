import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The webhook receiver of the benchmark: a plain node:http server in the benchmark process that
 * answers 200 at once and notes, per event, when it arrived and how long after `occurred_at`.
 */
export class BenchReceiver {
  /** event_id → arrival time (ms); duplicates (at-least-once) are counted once. */
  private arrivals = new Map<string, number>();
  private latencies: number[] = [];
  private waiter?: { count: number; resolve: () => void };
  duplicates = 0;

  private constructor(private readonly server: Server) {}

  static async start(): Promise<BenchReceiver> {
    const receiver: BenchReceiver = new BenchReceiver(
      createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const at = Date.now();
          response.writeHead(200).end();
          receiver.record(Buffer.concat(chunks).toString('utf8'), at);
        });
      }),
    );
    // Many keep-alive connections from the workers; never let idle ones time out mid-run.
    receiver.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  private record(body: string, at: number): void {
    let event: { event_id?: string; occurred_at?: string };
    try {
      event = JSON.parse(body) as typeof event;
    } catch {
      return;
    }
    if (!event.event_id) return;
    if (this.arrivals.has(event.event_id)) {
      this.duplicates++;
      return;
    }
    this.arrivals.set(event.event_id, at);
    if (event.occurred_at) this.latencies.push(at - Date.parse(event.occurred_at));
    if (this.waiter && this.arrivals.size >= this.waiter.count) this.waiter.resolve();
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  get received(): number {
    return this.arrivals.size;
  }

  get lastArrival(): number {
    let last = 0;
    for (const at of this.arrivals.values()) last = Math.max(last, at);
    return last;
  }

  /** Resolves once `count` distinct events arrived; false when `timeoutMs` passed first. */
  async waitFor(count: number, timeoutMs: number): Promise<boolean> {
    if (this.arrivals.size >= count) return true;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        new Promise<boolean>((resolve) => (this.waiter = { count, resolve: () => resolve(true) })),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
      ]);
    } finally {
      clearTimeout(timer);
      this.waiter = undefined;
    }
  }

  percentile(p: number): number {
    if (this.latencies.length === 0) return Number.NaN;
    const sorted = [...this.latencies].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
  }

  reset(): void {
    this.arrivals = new Map();
    this.latencies = [];
    this.duplicates = 0;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
