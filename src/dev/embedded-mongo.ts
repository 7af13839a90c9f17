import { spawn } from 'node:child_process';
import { type MongoStandinOptions, startMongoStandin } from './mongo-standin/index.js';

export type MongoBackend = 'external' | 'memory-server' | 'standin';

export interface EmbeddedMongo {
  url: string;
  kind: MongoBackend;
  /** One line for people: which MongoDB this is and, for the stand-in, why. */
  description: string;
  stop(): Promise<void>;
}

/** The server line the product is deployed against (docker-compose runs mongo:7); MONGOMS_VERSION overrides it. */
const DEFAULT_MONGOD_VERSION = '7.0.14';
/** Bound on finding or downloading a mongod: a hanging connection must not hold up `npm test` or `npm run dev`. */
const DOWNLOAD_TIMEOUT_MS = 60_000;
const BACKENDS: readonly MongoBackend[] = ['external', 'memory-server', 'standin'];

// Runs in a child process so that a download still under way at the deadline is ended with the process. It looks for a
// binary already on disk first; else it resolves the download host before downloading (offline, that fails at once
// instead of after the library's retries). Prints the binary's path, or exits 1 with the reason on stderr.
const FIND_OR_DOWNLOAD = `
const { DryMongoBinary, MongoBinary } = require('mongodb-memory-server-core');
const { MongoBinaryDownloadUrl } = require('mongodb-memory-server-core/lib/util/MongoBinaryDownloadUrl');
const { lookup } = require('node:dns/promises');
(async () => {
  const options = await DryMongoBinary.generateOptions({ version: process.env.MONGOMS_VERSION });
  let path = await DryMongoBinary.locateBinary(options);
  if (!path) {
    const url = process.env.MONGOMS_DOWNLOAD_URL || (await new MongoBinaryDownloadUrl(options).getDownloadUrl());
    await lookup(new URL(url).hostname);
    path = await MongoBinary.getPath(options);
  }
  process.stdout.write(path);
})().catch((e) => {
  process.stderr.write(String((e && e.message) || e).split('\\n').map((l) => l.trim()).filter(Boolean).join(' '));
  process.exit(1);
});
`;

/** The path of a mongod that mongodb-memory-server can run (on disk, or downloaded within the bound). */
function findOrDownloadMongod(env: NodeJS.ProcessEnv, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', FIND_OR_DOWNLOAD], {
      env: { ...env, MONGOMS_VERSION: env.MONGOMS_VERSION || DEFAULT_MONGOD_VERSION },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no answer within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0 && out) resolve(out.trim());
      else reject(new Error(err.trim().slice(0, 300) || `exit code ${code}`));
    });
  });
}

function chosenBackend(env: NodeJS.ProcessEnv): MongoBackend | undefined {
  const raw = env.MONGO_BACKEND;
  if (!raw) return env.MONGO_URL ? 'external' : undefined;
  if (!(BACKENDS as readonly string[]).includes(raw)) {
    throw new Error(`MONGO_BACKEND must be one of ${BACKENDS.join(', ')} (got '${raw}')`);
  }
  return raw as MongoBackend;
}

async function startMemoryServer(env: NodeJS.ProcessEnv, timeoutMs: number, port?: number): Promise<EmbeddedMongo> {
  let binary: string;
  try {
    binary = await findOrDownloadMongod(env, timeoutMs);
  } catch (e) {
    throw new MongodUnavailable(`mongod could not be downloaded: ${(e as Error).message}`);
  }
  try {
    const { MongoMemoryServer } = await import('mongodb-memory-server-core');
    const version = env.MONGOMS_VERSION || DEFAULT_MONGOD_VERSION;
    const server = await MongoMemoryServer.create({
      binary: { systemBinary: binary, version },
      ...(port ? { instance: { port } } : {}),
    });
    return {
      url: server.getUri(),
      kind: 'memory-server',
      description: `MongoDB: memory-server (${binary})`,
      stop: async () => void (await server.stop()),
    };
  } catch (e) {
    throw new MongodUnavailable(`mongod could not start: ${(e as Error).message.split('\n')[0]}`);
  }
}

class MongodUnavailable extends Error {}

async function startStandin(options: EmbeddedMongoOptions, why?: string): Promise<EmbeddedMongo> {
  const standin = await startMongoStandin({
    ...options.standin,
    port: options.port ?? 0,
    quiet: options.quiet ?? false,
  });
  return {
    url: standin.uri,
    kind: 'standin',
    description: `MongoDB: stand-in${why ? ` (${why})` : ''}`,
    stop: () => standin.close(),
  };
}

export interface EmbeddedMongoOptions {
  /** No start-up warning from the stand-in. */
  quiet?: boolean;
  /** MONGO_BACKEND, MONGO_URL and MONGOMS_* come from here; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Bound on finding or downloading mongod; default 60 s. */
  downloadTimeoutMs?: number;
  /** Port of the embedded server (memory-server or stand-in); default a free one. */
  port?: number;
  /** Behaviour of the stand-in when it is the one started (tests: shuffleUnsorted, interleaveUpserts). */
  standin?: Pick<MongoStandinOptions, 'shuffleUnsorted' | 'interleaveUpserts' | 'ttlMonitorSleepSecs'>;
}

/**
 * For tests and `npm run dev`. MONGO_BACKEND forces one (external = MONGO_URL); without it, MONGO_URL when set, else a
 * real mongod through mongodb-memory-server (MONGOMS_* variables apply), else the project's stand-in.
 */
export async function startEmbeddedMongo(options: EmbeddedMongoOptions = {}): Promise<EmbeddedMongo> {
  const env = options.env ?? process.env;
  const backend = chosenBackend(env);
  if (backend === 'external') {
    const url = env.MONGO_URL;
    if (!url) throw new Error('MONGO_BACKEND=external needs MONGO_URL');
    return { url, kind: 'external', description: 'MongoDB: external (MONGO_URL)', stop: async () => {} };
  }
  if (backend === 'standin') return startStandin(options, 'MONGO_BACKEND=standin');
  try {
    return await startMemoryServer(env, options.downloadTimeoutMs ?? DOWNLOAD_TIMEOUT_MS, options.port);
  } catch (e) {
    if (backend === 'memory-server' || !(e instanceof MongodUnavailable)) throw e;
    return startStandin(options, e.message);
  }
}
