import { createContainer, createEventPublisher } from '../src/container.js';
import { QUEUE_NAMES } from '../src/contracts/jobs.js';
import { ensureIndexes } from '../src/repositories.js';
import { closeQueues, createQueues } from '../src/shared/queues.js';
import { connectRedis, createWorkerRedis } from '../src/shared/redis.js';
import { startAutomations } from './automations.js';
import { startErasures } from './erasures.js';
import { startHooks } from './hooks.js';
import { startOverdue } from './overdue.js';
import { startRelay } from './relay.js';
import type { WorkerRole } from '../src/shared/config.js';
import type { RoleStarter, RunningRole, RunningWorkers, WorkerContext, WorkerOptions } from './role.js';

/** One file per role; each exports a starter. */
const ROLES: Record<WorkerRole, RoleStarter> = {
  relay: startRelay,
  automations: startAutomations,
  hooks: startHooks,
  overdue: startOverdue,
  erasures: startErasures,
};

/**
 * The container of a worker process. Its Redis client fails fast, so the publisher, the change feeds
 * and the claims notice an outage at once (MongoDB keeps the events meanwhile); the queue handles use
 * a worker connection, which waits an outage out, as the roles' BullMQ workers do.
 */
export function createWorkerContext(options: WorkerOptions): WorkerContext & { close(): Promise<void> } {
  const { config, db, logger } = options;
  const redis = connectRedis(config.REDIS_URL, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  const queueConnection = createWorkerRedis(config.REDIS_URL);
  queueConnection.on('error', () => {});
  const queues = createQueues(QUEUE_NAMES, { connection: queueConnection, prefix: config.QUEUE_PREFIX });
  const container = createContainer({
    config,
    db,
    redis,
    queues,
    logger,
    resolver: options.resolver,
    // Events the roles cause (automation actions, task.overdue) are published like the API's.
    publisher: (events) =>
      createEventPublisher(db, { connection: redis, prefix: config.QUEUE_PREFIX }, logger, {
        eventStore: events,
        sequencerLeaseMs: config.SEQUENCER_LEASE_MS,
        historyRetentionDays: config.HISTORY_RETENTION_DAYS,
      }),
  });
  return {
    ...options,
    container,
    async close() {
      await container.services.publisher.close();
      await closeQueues(queues);
      container.close();
      queueConnection.disconnect();
      redis.disconnect();
    },
  };
}

export async function startWorkers(options: WorkerOptions): Promise<RunningWorkers> {
  await ensureIndexes(options.db, options.logger);
  const context = createWorkerContext(options);
  const running = new Map<WorkerRole, RunningRole>();
  let closing = false;
  for (const role of options.config.WORKERS) {
    running.set(role, await ROLES[role]({ ...context, logger: options.logger.child({ role }) }));
    options.logger.info({ role }, 'worker role started');
  }
  return {
    async close() {
      closing = true;
      await Promise.all([...running.values()].map((role) => role.close()));
      await context.close();
    },
    states() {
      return Object.fromEntries(
        [...running].map(([name, role]) => [name, closing ? 'stopping' : (role.state?.() ?? 'running')]),
      );
    },
  };
}
