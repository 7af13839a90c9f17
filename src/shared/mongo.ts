import {
  MongoBulkWriteError,
  MongoClient,
  MongoNetworkError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type Db,
} from 'mongodb';
import { withTimeout } from './time.js';

export interface MongoConnection {
  client: MongoClient;
  db: Db;
}

/** Short server selection so an unreachable MongoDB becomes a 503 quickly instead of hanging a request for 30 s. */
export async function connectMongo(
  url: string,
  dbName: string,
  connectTimeoutMs = 5_000,
  options: { monitorCommands?: boolean } = {},
): Promise<MongoConnection> {
  const client = new MongoClient(url, {
    serverSelectionTimeoutMS: 5_000,
    connectTimeoutMS: 5_000,
    maxPoolSize: 50,
    appName: 'pipeline-records',
    // Command monitoring (MONGO_COMMAND_METRICS, tests): only connections made with it emit the events.
    monitorCommands: options.monitorCommands ?? false,
  });
  try {
    // The first selection may take only connectTimeoutMs; later ones keep the short default above.
    await withTimeout(client.connect(), connectTimeoutMs);
  } catch (error) {
    await client.close().catch(() => {});
    throw error;
  }
  return { client, db: client.db(dbName) };
}

/** Socket failures the driver can let through unwrapped (a write on a connection reset under it). */
const SOCKET_ERROR_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ETIMEDOUT', 'ENOTCONN']);

/** The driver reports an unreachable server with several classes; the error handler maps them all to 503. */
export function isMongoUnavailable(error: unknown): boolean {
  // A bulk write wraps a driver-level failure (the network, say) and keeps it as its errorResponse.
  if (error instanceof MongoBulkWriteError && error.errorResponse instanceof Error)
    return isMongoUnavailable(error.errorResponse);
  return (
    error instanceof MongoNetworkError ||
    error instanceof MongoServerSelectionError ||
    error instanceof MongoTopologyClosedError ||
    (error instanceof Error &&
      'syscall' in error &&
      SOCKET_ERROR_CODES.has(String((error as NodeJS.ErrnoException).code)))
  );
}

export function isDuplicateKeyError(error: unknown): error is MongoServerError {
  return error instanceof MongoServerError && error.code === 11000;
}

/**
 * The statements a bulk write (or insertMany) failed on, when every failure is a duplicate key, in
 * order (an ordered write stops at its first); undefined when any statement failed otherwise.
 */
export function duplicateKeyIndexes(error: unknown): number[] | undefined {
  if (!(error instanceof MongoBulkWriteError)) return undefined;
  const failures = [error.writeErrors].flat();
  // None at all: the driver wrapped a failure of the whole write (the network), so nothing is known written.
  if (failures.length === 0) return undefined;
  if (failures.some((failure) => failure.code !== 11000)) return undefined;
  return failures.map((failure) => failure.index).sort((a, b) => a - b);
}

/** Resolves within `timeoutMs` with whether MongoDB answered a ping. */
export function pingMongo(db: Db, timeoutMs = 1_000): Promise<boolean> {
  return withTimeout(db.command({ ping: 1 }), timeoutMs).then(
    () => true,
    () => false,
  );
}
