import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';

/**
 * A TCP link on loopback to a real server (here MongoDB), which a test can cut (every connection
 * reset, new ones refused) and restore on the same port: the server as seen through a network that
 * went away for a while.
 */
export class NetworkLink {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<this> {
    this.server = createServer((socket) => {
      const upstream = connect(this.targetPort, this.targetHost);
      for (const end of [socket, upstream]) {
        this.sockets.add(end);
        end.on('close', () => this.sockets.delete(end));
      }
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
      socket.on('close', () => upstream.destroy());
      upstream.on('close', () => socket.destroy());
      socket.pipe(upstream).pipe(socket);
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** Resets every connection through it and stops accepting new ones. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
    await closed;
  }

  /** Accepts connections again, on the same port. */
  restore(): Promise<this> {
    return this.start();
  }

  close(): Promise<void> {
    return this.cut();
  }
}
