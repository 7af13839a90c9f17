import {
  MongoClient,
  MongoNetworkError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  type Db,
} from 'mongodb';

export interface MongoConnection {
  client: MongoClient;
  db: Db;
}

/** Short server selection so an unreachable MongoDB becomes a 503 quickly instead of hanging a request for 30 s. */
export async function connectMongo(url: string, dbName: string): Promise<MongoConnection> {
  const client = new MongoClient(url, {
    serverSelectionTimeoutMS: 5_000,
    connectTimeoutMS: 5_000,
    maxPoolSize: 50,
    appName: 'pipeline-records',
  });
  await client.connect();
  return { client, db: client.db(dbName) };
}

/** The driver reports an unreachable server with several classes; the error handler maps them all to 503. */
export function isMongoUnavailable(error: unknown): boolean {
  return (
    error instanceof MongoNetworkError ||
    error instanceof MongoServerSelectionError ||
    error instanceof MongoTopologyClosedError
  );
}

export function isDuplicateKeyError(error: unknown): error is MongoServerError {
  return error instanceof MongoServerError && error.code === 11000;
}

/** Resolves within `timeoutMs` with whether MongoDB answered a ping. */
export async function pingMongo(db: Db, timeoutMs = 1_000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const ping = db
    .command({ ping: 1 })
    .then(() => true)
    .catch(() => false);
  try {
    return await Promise.race([ping, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
