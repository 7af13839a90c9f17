import { createServer, type Server } from 'node:http';

/** The hook subscriber of the soak: counts deliveries per webhook-id and always answers 200. */
export class CountingReceiver {
  readonly deliveries = new Map<string, number>();
  private server?: Server;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      const id = String(request.headers['webhook-id'] ?? '');
      request.resume();
      request.on('end', () => {
        this.deliveries.set(id, (this.deliveries.get(id) ?? 0) + 1);
        response.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.port = typeof address === 'object' && address ? address.port : 0;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  duplicates(): number {
    let count = 0;
    for (const times of this.deliveries.values()) if (times > 1) count++;
    return count;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
