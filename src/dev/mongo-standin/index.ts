// In-memory MongoDB wire-protocol stand-in for development and tests.
// NOT a database: no persistence, no replication, no transactions.

import { StandinServer } from './server.js';

export interface MongoStandinOptions {
  /** TCP port; 0 (default) picks a free port. */
  port?: number;
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** Suppress the start-up warning on stderr. */
  quiet?: boolean;
  /** Seconds between passes of the TTL monitor (MongoDB's ttlMonitorSleepSecs, default 60; setParameter changes it). */
  ttlMonitorSleepSecs?: number;
  /**
   * Let other connections' commands run between an upsert's failed match and its insert, as MongoDB may, so
   * concurrent upserts can collide (tests of duplicate-key retries). Off by default: each command runs alone.
   */
  interleaveUpserts?: boolean;
  /**
   * Answer every find, aggregate and single-document write that has no sort in a random order, so code that depends
   * on an order MongoDB does not promise fails in tests instead of in production. Off by default.
   */
  shuffleUnsorted?: boolean;
}

export interface MongoStandin {
  uri: string;
  port: number;
  close(): Promise<void>;
}

export async function startMongoStandin(opts: MongoStandinOptions = {}): Promise<MongoStandin> {
  const host = opts.host ?? '127.0.0.1';
  const server = new StandinServer({
    ttlMonitorSleepSecs: opts.ttlMonitorSleepSecs,
    interleaveUpserts: opts.interleaveUpserts,
    shuffleUnsorted: opts.shuffleUnsorted,
  });
  const port = await server.listen(opts.port ?? 0, host);
  if (!opts.quiet) {
    process.stderr.write(
      `WARNING: mongo-standin on ${host}:${port} is an in-memory MongoDB stand-in for development and tests only - not for production.\n`,
    );
  }
  const uriHost = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    uri: `mongodb://${uriHost}:${port}`,
    port,
    close: () => (closing ??= server.close()),
  };
}
