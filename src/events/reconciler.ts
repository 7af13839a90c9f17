import { EVENT_CONSUMERS, type EventsRepository } from './repository.js';
import type { DueDelivery, DeliveryJob } from '../contracts/jobs.js';
import type { Logger } from '../shared/logger.js';
import type { RedisClient } from '../shared/redis.js';
import type { QueueEventPublisher } from './queue-publisher.js';
import type { Queue } from 'bullmq';

const PAGE = 500;
/** Compare-and-set of the mark: a Redis that lost its data meanwhile has no mark to match. */
const SET_IF_EQUAL = `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[1], ARGV[2]) return 1 else return 0 end`;

export interface ReconcilerDeps {
  /** Fails fast while Redis is away. */
  redis: RedisClient;
  prefix: string;
  eventStore: EventsRepository;
  publisher: Pick<QueueEventPublisher, 'enqueue'>;
  deliveriesQueue: Pick<Queue<DeliveryJob, unknown, string>, 'addBulk'>;
  /** Deliveries waiting for an attempt, a page at a time, in a stable order (`after` = the last one's cursor). */
  dueDeliveries(limit: number, after: string | undefined): Promise<{ deliveries: DueDelivery[]; next?: string }>;
  logger: Logger;
  now?: () => number;
}

export interface ReconcileResult {
  /** Why a full pass ran; undefined when Redis had lost nothing. */
  reason?: 'no_mark' | 'mark_behind' | 'unfinished_pass' | 'follow_up';
  events: number;
  deliveries: number;
}

class RedisWentAway extends Error {}

/**
 * Finds out whether Redis lost work and, if so, schedules again everything MongoDB says is unfinished
 * (DECISIONS.md section 12.1). Redis carries a mark the reconciler sets, MongoDB the value it last
 * set: no mark (data lost: a restart without persistence, FLUSHALL), an older mark than MongoDB's (a
 * failover to a replica that lagged) or the mark of a pass that never finished means a full pass:
 * every event a consumer has not finished goes back on that consumer's queue, every delivery waiting
 * for an attempt back on the deliveries queue with its due time. Job ids are the event ids and the
 * deliveries' own, so whatever BullMQ still holds is left as it is. The new mark is set only if the
 * pass's own mark is still there at the end, so losing Redis during the pass makes the next one full.
 */
export class Reconciler {
  private readonly markKey: string;
  private followUpAt: number | undefined;

  constructor(
    private readonly deps: ReconcilerDeps,
    /** After a full pass, one more after this long: jobs that were running when Redis lost them record their outcome by then. */
    private readonly settleMs: number,
  ) {
    this.markKey = `${deps.prefix}:events:reconciled`;
  }

  private now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  /** One check, and a full pass when needed. Throws when Redis or MongoDB failed (the next tick retries). */
  async run(signal?: AbortSignal): Promise<ReconcileResult> {
    const { redis, eventStore } = this.deps;
    const [inRedis, inMongo] = await Promise.all([redis.get(this.markKey), eventStore.readReconcileMark()]);
    const reason = this.fullPassReason(inRedis, inMongo);
    if (!reason) {
      // Nothing lost: move the mark on, so a replica lagging behind this moment is recognised.
      const mark = String(this.now());
      if ((await redis.eval(SET_IF_EQUAL, 1, this.markKey, inRedis ?? '', mark)) === 1)
        await eventStore.writeReconcileMark(mark);
      return { events: 0, deliveries: 0 };
    }
    const passMark = `pass:${this.now()}`;
    await redis.set(this.markKey, passMark);
    const result: ReconcileResult = { reason, events: 0, deliveries: 0 };
    result.events = await this.scheduleUnfinishedEvents(signal);
    result.deliveries = await this.scheduleDueDeliveries(signal);
    const mark = String(this.now());
    if ((await redis.eval(SET_IF_EQUAL, 1, this.markKey, passMark, mark)) === 1) {
      await eventStore.writeReconcileMark(mark);
      this.followUpAt = reason === 'follow_up' ? undefined : this.now() + this.settleMs;
    }
    this.deps.logger.info(result, 'reconciled: unfinished work scheduled again from MongoDB');
    return result;
  }

  private fullPassReason(inRedis: string | null, inMongo: string | null): ReconcileResult['reason'] {
    if (inRedis === null) return 'no_mark';
    if (!/^\d+$/.test(inRedis)) return 'unfinished_pass';
    if (inMongo !== null && /^\d+$/.test(inMongo) && Number(inRedis) < Number(inMongo)) return 'mark_behind';
    if (this.followUpAt !== undefined && this.now() >= this.followUpAt) return 'follow_up';
    return undefined;
  }

  private async scheduleUnfinishedEvents(signal?: AbortSignal): Promise<number> {
    let scheduled = 0;
    for (const consumer of EVENT_CONSUMERS) {
      let after: string | undefined;
      for (;;) {
        signal?.throwIfAborted();
        const page = await this.deps.eventStore.findUnfinished(consumer, after, PAGE);
        if (page.length === 0) break;
        after = page.at(-1)?._id;
        // Events never queued are the relay's (it queues everything marked unqueued).
        const toQueue = page.filter((doc) => !doc.unqueued).map((doc) => ({ event: doc.event, consumers: [consumer] }));
        if (!(await this.deps.publisher.enqueue(toQueue, { republished: true }))) throw new RedisWentAway();
        scheduled += toQueue.length;
        if (page.length < PAGE) break;
      }
    }
    return scheduled;
  }

  private async scheduleDueDeliveries(signal?: AbortSignal): Promise<number> {
    let scheduled = 0;
    let after: string | undefined;
    for (;;) {
      signal?.throwIfAborted();
      const page = await this.deps.dueDeliveries(PAGE, after);
      if (page.deliveries.length === 0) break;
      const now = this.now();
      // Keeps each due time; one already passed runs at once.
      await this.deps.deliveriesQueue.addBulk(
        page.deliveries.map(({ jobId, data, dueAt }) => ({
          name: 'delivery',
          data,
          opts: { jobId, delay: Math.max(0, dueAt.getTime() - now) },
        })),
      );
      scheduled += page.deliveries.length;
      if (!page.next) break;
      after = page.next;
    }
    return scheduled;
  }
}
