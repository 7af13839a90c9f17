import cron from 'node-cron';
import { overdueScanDuration, overdueTasksFired } from '../src/shared/metrics.js';
import { acquireScanLock, claimOverdueTick, type ScanLock } from '../src/tasks/overdue-claims.js';
import { scanOverdueTasks } from '../src/tasks/overdue.js';
import type { Logger } from '../src/shared/logger.js';
import type { RoleStarter } from './role.js';

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
export const startOverdue: RoleStarter = async ({ config, logger, container }) => {
  const { redis, repos } = container;
  const { publisher } = container.services;
  const { tasks } = repos;
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
      const result = await scanOverdueTasks({ tasks, publisher, logger }, new Date(), {
        signal: AbortSignal.any([closing.signal, lock.lost]),
      });
      const stats = { tick: tick.toISOString(), ...result, duration_ms: Math.round(performance.now() - started) };
      overdueScanDuration.observe(stats.duration_ms / 1000);
      overdueTasksFired.inc(result.fired);
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
    state: () => (redisDown ? 'failing' : 'running'),
    async close() {
      await schedule.destroy();
      closing.abort(); // a running scan stops after its current batch
      await current;
    },
  };
};
