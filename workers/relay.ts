import { Reconciler } from '../src/events/reconciler.js';
import { relayPendingEvents } from '../src/events/relay.js';
import { createQueue } from '../src/shared/queues.js';
import { acquireRedisLock } from '../src/shared/redis-lock.js';
import type { RoleStarter } from './role.js';

const IDLE_POLL_MS = 250;
const ERROR_BACKOFF_MS = 1_000;

/**
 * The relay role: moves events recorded in document outboxes to the `events` collection and onto the
 * queues, and reconciles: every RECONCILE_INTERVAL_MS (and as soon as Redis answers again) one relay
 * process across all workers checks whether Redis lost work, and schedules again what MongoDB says is
 * unfinished (src/events/reconciler.ts, docs/events.md).
 */
export const startRelay: RoleStarter = async ({ config, db, logger, container }) => {
  const { repos } = container;
  const { publisher } = container.services;
  // The relay's lock and readiness go on the container's client, which fails fast; so does this
  // deliveries handle: a reconciliation must fail during an outage, not hold its lock waiting it out.
  const connection = container.redis;
  const deliveriesQueue = createQueue('deliveries', { connection, prefix: config.QUEUE_PREFIX });
  deliveriesQueue.on('error', () => {});
  const reconciler = new Reconciler(
    {
      redis: connection,
      prefix: config.QUEUE_PREFIX,
      eventStore: repos.events,
      publisher,
      deliveriesQueue,
      dueDeliveries: (limit, after) => repos.deliveries.dueAttempts(limit, after),
      logger,
    },
    Math.max(config.JOB_LOCK_MS, config.HOOK_TIMEOUT_MS) + 5_000,
  );
  const lockTtlMs = Math.max(2_000, 2 * config.RECONCILE_INTERVAL_MS);
  let stopped = false;
  let failing = false;
  let wake: (() => void) | undefined;

  const relayLoop = (async () => {
    while (!stopped) {
      let delay = IDLE_POLL_MS;
      try {
        await relayPendingEvents(db, publisher, logger);
        if (failing) logger.info('relay moving events again');
        failing = false;
      } catch (error) {
        if (!failing) logger.warn({ err: error }, 'relay cannot move events yet; they stay in the outbox');
        failing = true;
        delay = ERROR_BACKOFF_MS;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, delay);
      });
    }
  })();

  let reconciling: Promise<void> | undefined;
  const reconcile = () => {
    if (stopped || reconciling || connection.status !== 'ready') return;
    reconciling = (async () => {
      const lock = await acquireRedisLock(connection, `${config.QUEUE_PREFIX}:events:reconciling`, lockTtlMs);
      if (!lock) return;
      try {
        await reconciler.run(lock.lost);
      } finally {
        await lock.release();
      }
    })()
      .catch((error) => logger.warn({ err: error }, 'reconciliation did not finish; the next tick retries'))
      .finally(() => (reconciling = undefined));
  };
  const ticks = setInterval(reconcile, config.RECONCILE_INTERVAL_MS);
  connection.on('ready', reconcile); // Redis answers again: check at once rather than at the next tick
  reconcile();

  return {
    state: () => (failing ? 'failing' : 'running'),
    async close() {
      stopped = true;
      clearInterval(ticks);
      connection.off('ready', reconcile);
      wake?.();
      await relayLoop;
      await reconciling;
      await deliveriesQueue.close();
    },
  };
};
