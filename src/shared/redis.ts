import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';

/** A single Redis or a Redis Cluster; every Redis use in the product works with either. */
export type RedisClient = Redis | Cluster;

const CLUSTER_URL = /^(rediss?)\+cluster:\/\//;

/**
 * `redis+cluster://[user:password@]host:port,host:port,...` (or `rediss+cluster://` for TLS) names
 * the seed nodes of a Redis Cluster; the client learns the rest of the cluster from them.
 */
export function isClusterUrl(url: string): boolean {
  return CLUSTER_URL.test(url);
}

export function parseClusterUrl(url: string): {
  nodes: Array<{ host: string; port: number }>;
  tls: boolean;
  username?: string;
  password?: string;
} {
  const match = CLUSTER_URL.exec(url);
  if (!match) throw new Error('not a redis+cluster:// URL');
  const rest = url.slice(match[0].length);
  const at = rest.lastIndexOf('@');
  const credentials = at >= 0 ? rest.slice(0, at) : '';
  const hosts = (at >= 0 ? rest.slice(at + 1) : rest).replace(/\/.*$/, '');
  const nodes = hosts.split(',').map((hostPort) => {
    const colon = hostPort.lastIndexOf(':');
    const host = (colon >= 0 ? hostPort.slice(0, colon) : hostPort).replace(/^\[|\]$/g, '');
    const port = colon >= 0 ? Number(hostPort.slice(colon + 1)) : 6379;
    if (!host || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`bad cluster node "${hostPort}"`);
    return { host, port };
  });
  const [username, password] = credentials.includes(':')
    ? [credentials.slice(0, credentials.indexOf(':')), credentials.slice(credentials.indexOf(':') + 1)]
    : [undefined, credentials || undefined];
  return {
    nodes,
    tls: match[1] === 'rediss',
    ...(username ? { username: decodeURIComponent(username) } : {}),
    ...(password ? { password: decodeURIComponent(password) } : {}),
  };
}

/**
 * BullMQ keeps all of a queue's keys under its prefix, and its scripts (and the event producer's
 * multi-queue adds) touch several of them at once: on a cluster they must share one slot, which a
 * hash tag `{...}` in the prefix gives them (BullMQ's guide). Every queue then lives on one shard.
 */
export function queuePrefixFor(redisUrl: string, prefix: string): string {
  return isClusterUrl(redisUrl) && !prefix.includes('{') ? `{${prefix}}` : prefix;
}

/**
 * The namespace of keys that are not queue keys (rate-limit windows, failed-auth counters): the queue
 * prefix without its hash tag, so on a cluster these keys spread over every shard by their own name.
 */
export function keyNamespace(queuePrefix: string): string {
  return queuePrefix.replace(/[{}]/g, '');
}

/** A client for `url`: a Cluster for `redis+cluster://`, else a single-node client. */
export function connectRedis(url: string, options: RedisOptions = {}): RedisClient {
  if (!isClusterUrl(url)) return new Redis(url, options);
  const { nodes, tls, username, password } = parseClusterUrl(url);
  const { enableOfflineQueue, retryStrategy, lazyConnect, ...nodeOptions } = options;
  const clusterOptions: ClusterOptions = {
    redisOptions: { ...nodeOptions, ...(tls ? { tls: {} } : {}), username, password },
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
    ...(lazyConnect !== undefined ? { lazyConnect } : {}),
    // A retryStrategy that answers null gives up, as it does for a single node.
    clusterRetryStrategy: (attempt) => (retryStrategy ? retryStrategy(attempt) : Math.min(attempt * 200, 2_000)),
    // A failover takes the cluster a few node timeouts; commands wait that long instead of failing.
    retryDelayOnClusterDown: 200,
    retryDelayOnFailover: 200,
    slotsRefreshTimeout: 2_000,
  };
  return new Cluster(nodes, clusterOptions);
}

/**
 * The request path must never wait on an unreachable Redis (DECISIONS.md section 4): commands fail
 * at once while disconnected, and the client keeps reconnecting in the background.
 */
export function createRequestPathRedis(url: string, options: RedisOptions = {}): RedisClient {
  return connectRedis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2_000,
    commandTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
    lazyConnect: false,
    ...options,
  });
}

/** BullMQ workers need blocking commands that outlive maxRetriesPerRequest (BullMQ's production guide). */
export function createWorkerRedis(url: string, options: RedisOptions = {}): RedisClient {
  return connectRedis(url, {
    maxRetriesPerRequest: null,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
    ...options,
  });
}

/** Whether Redis answers: at once when connected, else it gets `timeoutMs` to finish (re)connecting. */
export async function isRedisReady(redis: RedisClient, timeoutMs = 500): Promise<boolean> {
  if (redis.status === 'ready') return true;
  return new Promise((resolve) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    redis.once('ready', onReady);
  });
}

/** Connects once and sends PING within `timeoutMs` (no retries), for the start-up check; rejects with the reason. */
export async function pingRedisOnce(url: string, timeoutMs: number): Promise<void> {
  const client = connectRedis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  let lastError: unknown;
  client.on('error', (error) => (lastError = error));
  try {
    await client.connect();
    await client.ping();
  } catch (error) {
    throw lastError ?? error;
  } finally {
    client.disconnect();
  }
}
