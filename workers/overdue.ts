import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import cron from 'node-cron';
import { QueueEventPublisher } from '../src/events/queue-publisher.js';
import type { Logger } from '../src/shared/logger.js';
import { createRequestPathRedis } from '../src/shared/redis.js';
import { scanOverdueTasks } from '../src/tasks/overdue.js';
import { TasksRepository } from '../src/tasks/repository.js';
import type { RoleStarter } from './start.js';

// Outlives any clock skew between worker processes, so a process whose tick fires late finds it taken.
const TICK_CLAIM_TTL_MS = 60_000;

const RENEW_IF_OWNER = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_IF_OWNER = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** Every process's node-cron fires the same tick time; the first SET NX of that tick's key wins it. */
export async function claimOverdueTick(redis: Redis, prefix: string, tick: Date): Promise<boolean> {
  const key = `${prefix}:overdue:tick:${Math.floor(tick.getTime() / 1000)}`;
  return (await redis.set(key, String(process.pid), 'PX', TICK_CLAIM_TTL_MS, 'NX')) === 'OK';
}

export interface ScanLock {
  /** Aborted when the lock could not be renewed: the scan stops at the next batch boundary. */
  lost: AbortSignal;
  release(): Promise<void>;
}

/**
 * Held for the duration of a scan, across processes, so a tick that overlaps a slow scan does not
 * start a second one. Renewed while held; if the holder dies, it expires after `ttlMs`.
 */
export async function acquireScanLock(redis: Redis, prefix: string, ttlMs: number): Promise<ScanLock | null> {
  const key = `${prefix}:overdue:running`;
  const token = randomUUID();
  if ((await redis.set(key, token, 'PX', ttlMs, 'NX')) !== 'OK') return null;
  const lost = new AbortController();
  const renewal = setInterval(() => {
    redis.eval(RENEW_IF_OWNER, 1, key, token, ttlMs).then(
      (renewed) => renewed === 1 || lost.abort(),
      () => lost.abort(),
    );
  }, Math.floor(ttlMs / 3));
  return {
    lost: lost.signal,
    async release() {
      clearInterval(renewal);
      await redis.eval(RELEASE_IF_OWNER, 1, key, token).catch(() => {}); // else it simply expires
    },
  };
}

/**
 * node-cron's own messages go to pino. Its warnings (a tick skipped because the previous scan still
 * runs, or missed under load) are expected here and harmless: the next tick covers those tasks.
 */
function cronLogger(logger: Logger) {
  return {
    info: (message: string) => logger.debug(message),
    debug: (message: string | Error) => logger.debug(String(message)),
    warn: (message: string) => logger.info(message),
    error: (message: string | Error, err?: Error) => logger.error({ err: err ?? message }, 'node-cron error'),
  };
}

/**
 * The overdue role: on every OVERDUE_SCAN_CRON tick, one process across all workers claims the tick
 * and, unless a scan is still running somewhere, scans. A task is therefore fired within one tick
 * interval plus the scan time after its due_at. With Redis unreachable ticks are skipped (no claim
 * can be made, and the events could not be published either).
 */
export const startOverdue: RoleStarter = async ({ config, db, logger }) => {
  const redis = createRequestPathRedis(config.REDIS_URL);
  redis.on('error', () => {});
  const publisher = new QueueEventPublisher(db, { connection: redis, prefix: config.QUEUE_PREFIX }, logger);
  const tasks = new TasksRepository(db);
  const closing = new AbortController();
  let redisDown = false;
  let current: Promise<void> = Promise.resolve();

  async function claim(tick: Date): Promise<ScanLock | null> {
    try {
      const claimed = await claimOverdueTick(redis, config.QUEUE_PREFIX, tick);
      const lock = claimed ? await acquireScanLock(redis, config.QUEUE_PREFIX, config.JOB_LOCK_MS) : null;
      if (redisDown) logger.info('Redis answers again; overdue ticks resume');
      redisDown = false;
      return lock;
    } catch (error) {
      if (!redisDown) logger.warn({ err: error }, 'Redis unreachable; overdue ticks are skipped until it answers');
      redisDown = true;
      return null;
    }
  }

  async function runTick(tick: Date): Promise<void> {
    const lock = await claim(tick);
    if (!lock) return;
    if (closing.signal.aborted) return lock.release();
    const started = performance.now();
    try {
      const result = await scanOverdueTasks({ tasks, publisher, logger }, new Date(), { signal: AbortSignal.any([closing.signal, lock.lost]) });
      const stats = { tick: tick.toISOString(), ...result, duration_ms: Math.round(performance.now() - started) };
      if (result.fired > 0) logger.info(stats, 'overdue scan fired task.overdue');
      else logger.debug(stats, 'overdue scan found nothing due');
    } catch (error) {
      logger.error({ err: error, tick: tick.toISOString() }, 'overdue scan failed; the next tick retries');
    } finally {
      await lock.release();
    }
  }

  const schedule = cron.schedule(config.OVERDUE_SCAN_CRON, (context) => (current = runTick(context.date)), {
    name: 'overdue-scan',
    noOverlap: true,
    logger: cronLogger(logger),
  });

  return {
    async close() {
      await schedule.destroy();
      closing.abort(); // a running scan stops after its current batch
      await current;
      await publisher.close();
      redis.disconnect();
    },
  };
};
