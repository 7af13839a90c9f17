import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { startMongoStandin } from './mongo-standin/index.js';

export interface EmbeddedMongo {
  url: string;
  kind: 'external' | 'memory-server' | 'standin';
  stop(): Promise<void>;
}

/** A mongod binary that mongodb-memory-server could use without downloading anything. */
function localMongodBinary(): string | undefined {
  const explicit = process.env.MONGOMS_SYSTEM_BINARY;
  if (explicit && existsSync(explicit)) return explicit;
  const cache = process.env.MONGOMS_DOWNLOAD_DIR ?? join(homedir(), '.cache', 'mongodb-binaries');
  if (!existsSync(cache)) return undefined;
  const binary = readdirSync(cache).find((name) => name.startsWith('mongod'));
  return binary ? join(cache, binary) : undefined;
}

/**
 * For tests and `npm run dev`: MONGO_URL when set; else mongodb-memory-server when a mongod binary is already on disk;
 * else the project's stand-in. Never starts a download (the build machines are offline).
 */
export async function startEmbeddedMongo(options: { quiet?: boolean } = {}): Promise<EmbeddedMongo> {
  if (process.env.MONGO_URL) {
    return { url: process.env.MONGO_URL, kind: 'external', stop: async () => {} };
  }
  const binary = localMongodBinary();
  if (binary) {
    const { MongoMemoryServer } = await import('mongodb-memory-server-core');
    const server = await MongoMemoryServer.create({ binary: { systemBinary: binary } });
    return { url: server.getUri(), kind: 'memory-server', stop: async () => void (await server.stop()) };
  }
  const standin = await startMongoStandin({ port: 0, quiet: options.quiet ?? false });
  return { url: standin.uri, kind: 'standin', stop: () => standin.close() };
}
