import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalRedisCluster } from '../../src/dev/redis-cluster.js';
import { freePort, PrivateRedisServer } from '../../src/dev/redis-server.js';
import { compiledTree, REPO_ROOT as root } from '../compiled-tree.js';

export interface ManagedProcess {
  name: string;
  child: ChildProcess;
  port?: number;
}

/** Each process logs (warn and above) to its own file in `logDir`, so a failure can be read afterwards. */
export const logDir = mkdtempSync(join(tmpdir(), 'soak-logs-'));

/** Starts `script` (a path in the compiled tree, see compiled-tree.ts) with its output in the log directory. */
function startNode(name: string, script: string, env: Record<string, string>): ChildProcess {
  const log = openSync(join(logDir, `${name}.log`), 'a');
  return spawn(process.execPath, [script], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', NODE_ENV: 'test', ...env },
    stdio: ['ignore', log, log],
  });
}

async function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms`)), timeoutMs);
    let buffer = '';
    child.stdout?.on('data', (chunk) => {
      buffer += String(chunk);
      const match = pattern.exec(buffer);
      if (match) {
        clearTimeout(timer);
        resolve(match[0]);
      }
    });
    child.once('exit', () => reject(new Error(`process exited before ${pattern}`)));
  });
}

async function waitForHttp(url: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} did not answer`);
}

export async function stopProcess(
  managed: ManagedProcess,
  signal: NodeJS.Signals = 'SIGTERM',
  timeoutMs = 15_000,
): Promise<void> {
  const { child } = managed;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await exited;
  clearTimeout(timer);
}

/** MongoDB (MONGO_URL or the stand-in as its own process), a persistent private Redis, and the service's env. */
export class SoakStack {
  readonly processes: ManagedProcess[] = [];
  mongoUrl = '';
  redis!: PrivateRedisServer;
  /** With `--cluster`: a 3-master Redis Cluster with a replica each instead of one Redis. */
  cluster?: LocalRedisCluster;
  readonly adminToken = 'soak-admin-token-0123456789';
  readonly prefix = `soak${Date.now()}`;
  readonly dbName = `soak_${Date.now()}`;
  private mongo?: ManagedProcess;
  /** The compiled tree the service's processes run from (startInfrastructure builds it). */
  private tree?: string;

  get redisUrl(): string {
    return this.cluster?.url ?? this.redis.url;
  }

  /** `volatileRedis`: a Redis that persists nothing, so a restart loses everything it held (as production Redis often does). */
  async startInfrastructure(options: { cluster?: boolean; volatileRedis?: boolean } = {}): Promise<void> {
    this.tree = await compiledTree();
    if (process.env.MONGO_URL) this.mongoUrl = process.env.MONGO_URL;
    else {
      const port = await freePort();
      const standin = spawn(
        process.execPath,
        [`${this.tree}/dist/src/dev/mongo-standin/cli.js`, '--port', String(port)],
        {
          cwd: root,
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      );
      this.mongo = { name: 'mongo', child: standin, port };
      this.mongoUrl = (await waitForLine(standin, /mongodb:\/\/127\.0\.0\.1:\d+/)).trim();
    }
    if (options.cluster) this.cluster = await LocalRedisCluster.start({ replicas: 1, nodeTimeoutMs: 1_000 });
    else
      this.redis = await PrivateRedisServer.start(
        options.volatileRedis ? {} : { dataDir: mkdtempSync(join(tmpdir(), 'soak-redis-')) },
      );
  }

  private compiled(): string {
    if (!this.tree) throw new Error('startInfrastructure() first: it compiles the tree the processes run from');
    return this.tree;
  }

  env(extra: Record<string, string> = {}): Record<string, string> {
    return {
      MONGO_URL: this.mongoUrl,
      MONGO_DB: this.dbName,
      REDIS_URL: this.redisUrl,
      QUEUE_PREFIX: this.prefix,
      ADMIN_TOKEN: this.adminToken,
      RATE_LIMIT_MAX: '1000000',
      HOOK_ALLOW_PRIVATE_TARGETS: 'true',
      HOOK_BACKOFF_MS: '200',
      HOOK_TIMEOUT_MS: '5000',
      JOB_LOCK_MS: '2000',
      RECONCILE_INTERVAL_MS: '2000',
      ...extra,
    };
  }

  async startWeb(name: string, port?: number): Promise<ManagedProcess> {
    const listenPort = port ?? (await freePort());
    const managed = {
      name,
      child: startNode(
        name,
        `${this.compiled()}/dist/src/server.js`,
        this.env({ PORT: String(listenPort), HOST: '127.0.0.1' }),
      ),
      port: listenPort,
    };
    this.processes.push(managed);
    await waitForHttp(`http://127.0.0.1:${listenPort}/readyz`);
    return managed;
  }

  startWorker(name: string): ManagedProcess {
    const managed = { name, child: startNode(name, `${this.compiled()}/dist/workers/main.js`, this.env()) };
    this.processes.push(managed);
    return managed;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.processes.map((managed) => stopProcess(managed, 'SIGTERM', 5_000)));
    await this.redis?.stop();
    await this.cluster?.stop();
    if (this.mongo) await stopProcess(this.mongo, 'SIGTERM', 3_000);
  }
}
