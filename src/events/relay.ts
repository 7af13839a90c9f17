import { findPending, OUTBOX_COLLECTIONS } from '../shared/outbox.js';
import { acquireRedisLock } from '../shared/redis-lock.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { Logger } from '../shared/logger.js';
import type { RedisClient } from '../shared/redis.js';
import type { QueueEventPublisher } from './queue-publisher.js';
import type { Reconciler } from './reconciler.js';
import type { Db } from 'mongodb';

const BATCH = 200;
const UNQUEUED_BATCH = 500;

export interface RelayPass {
  /** Events moved from document outboxes to `events`. */
  moved: number;
  /** Sequenced events handed to the queues after they waited in `events` (Redis was away when sequenced). */
  queued: number;
}

/**
 * One relay pass. First every document outbox is emptied into `events`, in bounded batches, whether
 * or not Redis answers (so no outbox grows while Redis is away; the sequencer takes them from there);
 * then, while Redis answers, the sequenced events no queue has taken yet are queued. Safe to run in
 * several processes at once: recording an event twice keeps the first, and jobId = event_id makes a
 * double publish a no-op.
 */
export async function relayPendingEvents(db: Db, publisher: QueueEventPublisher, logger: Logger): Promise<RelayPass> {
  const pass: RelayPass = { moved: 0, queued: 0 };
  for (const collection of OUTBOX_COLLECTIONS) {
    for (;;) {
      const pending = await findPending(db, collection, BATCH);
      if (pending.length === 0) break;
      const documents = pending.map((doc) => ({
        documentId: String(doc._id),
        companyId: String(doc.company_id),
        events: (doc.pending_events ?? []) as EventEnvelope[],
      }));
      const count = documents.reduce((sum, document) => sum + document.events.length, 0);
      await publisher.publishAndClear(collection, documents);
      pass.moved += count;
      if (pending.length < BATCH) break;
    }
  }
  while (publisher.isConnected()) {
    const unqueued = await publisher.eventStore.findUnqueued(UNQUEUED_BATCH);
    if (unqueued.length === 0) break;
    const toQueue = unqueued.map((doc) => ({ event: doc.event, consumers: doc.pending }));
    if (!(await publisher.enqueue(toQueue, { republished: true }))) break;
    await publisher.eventStore.markQueued(unqueued.map((doc) => doc.event));
    pass.queued += unqueued.length;
    if (unqueued.length < UNQUEUED_BATCH) break;
  }
  if (pass.moved > 0 || pass.queued > 0) logger.debug(pass, 'relay moved and queued events');
  return pass;
}

const IDLE_POLL_MS = 250;
const ERROR_BACKOFF_MS = 1_000;

export interface RelayRoleDeps {
  db: Db;
  publisher: QueueEventPublisher;
  reconciler: Pick<Reconciler, 'run'>;
  /** Fails fast while Redis is away: the reconciliation's lock and its readiness. */
  redis: RedisClient;
  prefix: string;
  reconcileIntervalMs: number;
  logger: Logger;
}

/**
 * The relay's two loops (docs/events.md): relay passes, back to back while there is work and every
 * IDLE_POLL_MS when idle; and every `reconcileIntervalMs` (and as soon as Redis answers again) one
 * reconciliation across all relay processes, under a Redis lock, which schedules again what MongoDB says
 * is unfinished.
 */
export function startRelayLoops(deps: RelayRoleDeps) {
  const { redis, logger } = deps;
  const lockTtlMs = Math.max(2_000, 2 * deps.reconcileIntervalMs);
  let stopped = false;
  let failing = false;
  let wake: (() => void) | undefined;

  const relayLoop = (async () => {
    while (!stopped) {
      let delay = IDLE_POLL_MS;
      try {
        await relayPendingEvents(deps.db, deps.publisher, logger);
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
    if (stopped || reconciling || redis.status !== 'ready') return;
    reconciling = (async () => {
      const lock = await acquireRedisLock(redis, `${deps.prefix}:events:reconciling`, lockTtlMs);
      if (!lock) return;
      try {
        await deps.reconciler.run(lock.lost);
      } finally {
        await lock.release();
      }
    })()
      .catch((error) => logger.warn({ err: error }, 'reconciliation did not finish; the next tick retries'))
      .finally(() => (reconciling = undefined));
  };
  const ticks = setInterval(reconcile, deps.reconcileIntervalMs);
  redis.on('ready', reconcile); // Redis answers again: check at once rather than at the next tick
  reconcile();

  return {
    state: (): 'failing' | 'running' => (failing ? 'failing' : 'running'),
    async close() {
      stopped = true;
      clearInterval(ticks);
      redis.off('ready', reconcile);
      wake?.();
      await relayLoop;
      await reconciling;
    },
  };
}
