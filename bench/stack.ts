import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { MongoClient, type Db } from 'mongodb';
import { freePort, PrivateRedisServer } from '../src/dev/redis-server.js';
import { compiled, waitForHttp, waitForLine } from './children.js';
import { cpuMeter } from './cpu.js';
import type { Children } from './children.js';
import type { BenchOptions } from './options.js';
import type { ChildProcess } from 'node:child_process';

export interface Service {
  url: string;
  child: ChildProcess;
}

/** What every scenario runs against: our web process, the bare baseline, and (later) one worker process. */
export interface Stack {
  mongo: { url: string; kind: 'MONGO_URL' | 'stand-in' };
  redisUrl: string;
  dbName: string;
  queuePrefix: string;
  adminToken: string;
  /** The benchmark's own connections, for seeding and checks. */
  db: Db;
  redis: Redis;
  web: Service;
  baseline: Service;
  worker?: ChildProcess;
  /** The worker's metrics server (METRICS_PORT), once it runs: it counts its MongoDB commands (MONGO_COMMAND_METRICS). */
  workerMetrics?: { url: string };
  children: Children;
  /** Starts the one worker process (`WORKERS=hooks,relay`); resolves once it serves /metrics. */
  startWorker(): Promise<ChildProcess>;
  /**
   * Another web process (same settings as `web`, plus `env`), for scenarios that need one configured
   * differently; it is stopped with the others. Resolves once it answers /healthz. Only its environment
   * differs: the product runs as it ships, never with a preload that patches it.
   */
  startExtraWeb(name: string, env: Record<string, string>): Promise<Service>;
  /** A further bench server (`bench/<script>.ts`, the baseline's environment plus PORT); resolves once `readyPath` answers. */
  startBenchServer(name: string, script: string, readyPath: string): Promise<Service>;
  /** Stops web, worker and baseline (gracefully, so CPU profiles are written); backends stay up. */
  stopServices(): Promise<void>;
  /** Stops the services, drops the database (on a real MongoDB), stops Redis and the stand-in. */
  close(): Promise<void>;
}

/** The MongoDB stand-in in its own process, so the web process's CPU and memory are its own. */
async function startStandin(children: Children, nodeArgs: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = children.spawnNode(
    'mongo-standin',
    'src/dev/mongo-standin/cli.ts',
    {},
    // A free port, not MongoDB's 27017: another benchmark (or a developer's stand-in) may hold that one.
    { stdout: 'pipe', backend: true, nodeArgs, args: ['--port', '0'] },
  );
  const url = await waitForLine(child, 'ready ', 30_000);
  return { url, child };
}

/**
 * `--cpu-prof` into <outDir>/<name>/ when profiling (one directory per process; tsx's loader thread writes a
 * second file). `--profile=perf` instead writes V8's jitdump (jit-PID.dump in the working directory) for `perf record
 * -k mono -e cpu-clock -g -p PID` and `perf inject --jit` (bench/perf-diff.ts runs it) to name JavaScript functions, also
 * in interpreted frames: perf counts CPU, where `--cpu-prof` counts wall time (docs/benchmarks.md).
 */
export function profileArgs(options: BenchOptions, name: string): string[] {
  if (options.profile === 'perf') return ['--perf-prof', '--interpreted-frames-native-stack'];
  if (options.profile !== 'v8') return [];
  const dir = join(options.outDir, name);
  mkdirSync(dir, { recursive: true });
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

/** Webhooks sent at once by our worker and by the bare baseline worker alike (the service's default). */
export const HOOK_CONCURRENCY = 50;

// package.json's scripts, read once; this module runs as dist/bench/bench/stack.js.
const PACKAGE_SCRIPTS = (
  JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    scripts: Record<'start' | 'worker', string>;
  }
).scripts;

/**
 * The node flags `npm start` runs the web process with and `npm run worker` the worker (package.json, the one
 * place they are set; test/ops/deploy-files.test.ts holds the Dockerfile and compose to them), so every process
 * here runs as in production.
 */
function productionNodeFlags(script: 'start' | 'worker'): string[] {
  const args = PACKAGE_SCRIPTS[script].split(' ');
  return args.slice(1, args.indexOf('--import'));
}

/** Production's node flags (the web's, or the worker's) and the OpenTelemetry preload (it does nothing unless configured), compiled for the benchmark. */
const preload = (script: 'start' | 'worker' = 'start') => [
  ...productionNodeFlags(script),
  '--import',
  compiled('src/telemetry/preload.ts'),
];

export async function startStack(options: BenchOptions, children: Children): Promise<Stack> {
  // The stand-in keeps every record of the run in memory (items, tasks and their event records from every
  // scenario): a full run outgrows V8's default heap, which is the stand-in's limit, not the product's.
  const standin = process.env.MONGO_URL
    ? undefined
    : await startStandin(children, ['--max-old-space-size=12288', ...profileArgs(options, 'mongo')]);
  const mongoUrl = process.env.MONGO_URL ?? standin!.url;
  // Always a private Redis: the benchmark reads MONITOR and INFO and must not disturb anyone else's.
  const redisServer = await PrivateRedisServer.start();
  children.defer(() => redisServer.stop());
  const suffix = randomUUID().slice(0, 8);
  const dbName = `bench_${suffix}`;
  const queuePrefix = `bench${suffix}`;
  const adminToken = randomBytes(24).toString('hex');
  const log = (name: string) => openSync(join(options.outDir, `${name}.log`), 'a');

  const client = await MongoClient.connect(mongoUrl);
  const db = client.db(dbName);
  children.defer(async () => {
    if (!standin) await db.dropDatabase();
    await client.close();
  });
  const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  children.defer(async () => redis.disconnect());

  const common = {
    MONGO_URL: mongoUrl,
    MONGO_DB: dbName,
    REDIS_URL: redisServer.url,
    QUEUE_PREFIX: queuePrefix,
    ADMIN_TOKEN: adminToken,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
    HOOK_ALLOW_PRIVATE_TARGETS: 'true',
    HOOK_CONCURRENCY: String(HOOK_CONCURRENCY),
  };

  const spawnWeb = async (name: string, env: Record<string, string> = {}): Promise<Service> => {
    const port = await freePort();
    const child = children.spawnNode(
      name,
      'src/server.ts',
      {
        ...common,
        PORT: String(port),
        HOST: '127.0.0.1',
        // Throughput scenarios must never be throttled; the limiter still does its full Redis round trip.
        RATE_LIMIT_MAX: '1000000000',
        ...env,
      },
      {
        stdout: log(name),
        nodeArgs: [...profileArgs(options, name), ...preload()],
      },
    );
    return { url: `http://127.0.0.1:${port}`, child };
  };
  const extras: ChildProcess[] = [];
  const web = await spawnWeb('web');
  const webChild = web.child;

  const spawnBenchServer = async (name: string, script: string): Promise<Service> => {
    const port = await freePort();
    const child = children.spawnNode(
      name,
      script,
      {
        PORT: String(port),
        MONGO_URL: mongoUrl,
        MONGO_DB: dbName,
        REDIS_URL: redisServer.url,
        QUEUE_PREFIX: queuePrefix,
      },
      { stdout: log(name), nodeArgs: profileArgs(options, name) },
    );
    return { url: `http://127.0.0.1:${port}`, child };
  };
  const baseline = await spawnBenchServer('baseline', 'bench/baseline-server.ts');
  const baselineChild = baseline.child;

  await Promise.all([
    waitForHttp(`${web.url}/healthz`, webChild, 60_000),
    waitForHttp(`${baseline.url}/hello`, baselineChild, 60_000),
  ]);
  const redisPid = /process_id:(\d+)/.exec(await redis.info('server'))?.[1];
  for (const [name, pid] of [
    ['web', webChild.pid],
    ['baseline', baselineChild.pid],
    ['mongo', standin?.child.pid],
    ['redis', Number(redisPid)],
    ['bench', process.pid],
  ] as const) {
    cpuMeter.watch(name, pid);
  }

  const stack: Stack = {
    mongo: { url: mongoUrl, kind: standin ? 'stand-in' : 'MONGO_URL' },
    redisUrl: redisServer.url,
    dbName,
    queuePrefix,
    adminToken,
    db,
    redis,
    web,
    baseline,
    children,
    async startWorker() {
      const metricsPort = await freePort();
      const worker = children.spawnNode(
        'worker',
        'workers/main.ts',
        {
          ...common,
          WORKERS: 'hooks,relay',
          METRICS_PORT: String(metricsPort),
          // Round trips per delivery for the webhook row (one listener call per command: negligible).
          MONGO_COMMAND_METRICS: 'true',
        },
        { stdout: log('worker'), nodeArgs: [...profileArgs(options, 'worker'), ...preload('worker')] },
      );
      await waitForHttp(`http://127.0.0.1:${metricsPort}/metrics`, worker, 60_000);
      stack.worker = worker;
      stack.workerMetrics = { url: `http://127.0.0.1:${metricsPort}` };
      cpuMeter.watch('worker', worker.pid);
      return worker;
    },
    async startExtraWeb(name, env) {
      const service = await spawnWeb(name, env);
      extras.push(service.child);
      await waitForHttp(`${service.url}/healthz`, service.child, 60_000);
      cpuMeter.watch(name, service.child.pid);
      return service;
    },
    async startBenchServer(name, script, readyPath) {
      const service = await spawnBenchServer(name, script);
      extras.push(service.child);
      await waitForHttp(`${service.url}${readyPath}`, service.child, 60_000);
      cpuMeter.watch(name, service.child.pid);
      return service;
    },
    async stopServices() {
      await Promise.all([stack.worker, webChild, baselineChild, ...extras].map((child) => children.stop(child)));
    },
    async close() {
      await stack.stopServices();
      await children.cleanup();
    },
  };
  return stack;
}
