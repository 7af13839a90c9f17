import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedMongo } from '../../src/dev/embedded-mongo.js';

// A download host that accepts connections and never answers: the worst case for an offline or firewalled machine.
let silent: net.Server;
const held: net.Socket[] = [];
let downloadDir: string;

beforeAll(async () => {
  silent = net.createServer((socket) => held.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  downloadDir = mkdtempSync(join(tmpdir(), 'mongoms-'));
});

afterAll(async () => {
  held.forEach((socket) => socket.destroy());
  await new Promise((resolve) => silent.close(resolve));
  rmSync(downloadDir, { recursive: true, force: true });
});

function hangingDownloadEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const { port } = silent.address() as net.AddressInfo;
  return {
    PATH: process.env.PATH,
    HOME: downloadDir,
    MONGOMS_DOWNLOAD_DIR: downloadDir,
    MONGOMS_VERSION: '7.0.999',
    MONGOMS_DOWNLOAD_URL: `https://127.0.0.1:${port}/mongodb-linux-x86_64-debian12-7.0.999.tgz`,
    ...extra,
  };
}

describe('startEmbeddedMongo', () => {
  it('falls back to the stand-in, saying why, when the mongod download does not answer within the bound', async () => {
    const started = Date.now();
    const mongo = await startEmbeddedMongo({ quiet: true, env: hangingDownloadEnv(), downloadTimeoutMs: 1_500 });
    try {
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(mongo.kind).toBe('standin');
      expect(mongo.description).toBe('MongoDB: stand-in (mongod could not be downloaded: no answer within 1.5 s)');
      const client = await MongoClient.connect(mongo.url);
      expect((await client.db('admin').command({ ping: 1 })).ok).toBe(1);
      await client.close();
    } finally {
      await mongo.stop();
    }
  });

  it('MONGO_BACKEND=memory-server fails instead of falling back', async () => {
    const env = hangingDownloadEnv({ MONGO_BACKEND: 'memory-server' });
    await expect(startEmbeddedMongo({ quiet: true, env, downloadTimeoutMs: 1_000 })).rejects.toThrow(
      'mongod could not be downloaded: no answer within 1 s',
    );
  });

  it('MONGO_BACKEND=standin and external are taken as they are; anything else is refused in one line', async () => {
    const standin = await startEmbeddedMongo({ quiet: true, env: { MONGO_BACKEND: 'standin', MONGO_URL: 'x' } });
    expect([standin.kind, standin.description]).toEqual(['standin', 'MongoDB: stand-in (MONGO_BACKEND=standin)']);
    await standin.stop();

    const external = await startEmbeddedMongo({ env: { MONGO_URL: 'mongodb://db.example:27017' } });
    expect([external.kind, external.url]).toEqual(['external', 'mongodb://db.example:27017']);
    await expect(startEmbeddedMongo({ env: { MONGO_BACKEND: 'external' } })).rejects.toThrow(
      'MONGO_BACKEND=external needs MONGO_URL',
    );
    await expect(startEmbeddedMongo({ env: { MONGO_BACKEND: 'mongod' } })).rejects.toThrow(
      "MONGO_BACKEND must be one of external, memory-server, standin (got 'mongod')",
    );
  });
});
