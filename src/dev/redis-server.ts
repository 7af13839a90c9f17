import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

export function hasRedisServerBinary(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A private, throw-away redis-server (no persistence) on a free port. Tests that take Redis down
 * mid-run start their own so they never disturb the rest of the suite.
 */
export class PrivateRedisServer {
  private child?: ChildProcess;
  /** With `dataDir`, data survives a restart (append-only file, fsync always), as a production Redis should. */
  private constructor(
    readonly port: number,
    private readonly dataDir?: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** On `port` when given (a pinned port), else on a free one. */
  static async start(options: { dataDir?: string; port?: number } = {}): Promise<PrivateRedisServer> {
    const server = new PrivateRedisServer(options.port ?? (await freePort()), options.dataDir);
    await server.start();
    return server;
  }

  async start(): Promise<void> {
    this.child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--protected-mode',
        'no',
        ...(this.dataDir
          ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', this.dataDir]
          : ['--appendonly', 'no']),
      ],
      { stdio: 'ignore' },
    );
    await this.waitUntilAnswering();
  }

  /** SIGKILL, as an outage looks to clients. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.child = undefined;
  }

  private async waitUntilAnswering(): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => {});
      try {
        await probe.connect();
        if ((await probe.ping()) === 'PONG') return;
      } catch {
        // not listening yet
      } finally {
        probe.disconnect();
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`redis-server on port ${this.port} did not start`);
  }
}
