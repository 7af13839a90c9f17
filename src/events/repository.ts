import { type Collection, type Db, type Filter, type FindCursor, type UpdateFilter } from 'mongodb';
import { resourceOf } from '../contracts/envelope.js';
import { EVENT_QUEUES, type EventQueue } from '../contracts/jobs.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import { duplicateKeyIndexes } from '../shared/mongo.js';
import type { EventRef, EventEnvelope, EventType } from '../contracts/envelope.js';

/** The consumers of every event (each an event queue): what each has finished is recorded on the event. */
export const EVENT_CONSUMERS = EVENT_QUEUES;
export type EventConsumer = EventQueue;

const DAY_MS = 24 * 3_600_000;
export const DEFAULT_RETENTION_DAYS = 30;

/**
 * One event, kept for EVENTS_RETENTION_DAYS (DECISIONS.md section 12.1): MongoDB is its durable home,
 * the queues only schedule the work. `pending` lists the consumers that have not finished it, so
 * "unfinished" is an indexed query; `unqueued` marks an event no queue has been given yet;
 * `unsequenced` one the sequencer has not yet given its place in the feed (`sequence`): until then it
 * is not readable and no queue gets it (docs/events.md, "The change feed").
 */
export interface EventDoc {
  /** The event_id. */
  _id: string;
  company_id: string;
  type: EventType;
  occurred_at: Date;
  /** The task or item the event is about. */
  resource_id: string | null;
  /** The envelope as consumers get it (with the internal `depth`). */
  event: EventEnvelope;
  pending: EventConsumer[];
  unqueued?: true;
  unsequenced?: true;
  /** The company's feed position (also in `event.sequence`), once the sequencer assigned it. */
  sequence?: number;
  /** Erasure took its values (docs/erasure.md); `event.erased` says so to readers. */
  erased?: true;
  /** The job id of the batch the sequencer published the event in (both event queues), if it did. */
  publish_job?: string;
  recorded_at: Date;
  /** occurred_at + retention: the TTL index removes the event some time after (reads never rely on when). */
  expires_at: Date;
}

export interface EventFeedFilter {
  types: EventType[];
  occurredAfter?: Date;
  occurredBefore?: Date;
  resourceId?: string;
  /** Leave out the events this API key caused. */
  excludeActor?: string;
}

/** A sequence the sequencer gave an event, and the batch job it was published in (if it was). */
export interface SequenceAssignment {
  event: EventRef;
  sequence: number;
  publishJob?: string;
}

/** What identifies an event for a targeted write: its id and its company. */

export interface ConsumerFinished {
  event: EventRef;
  consumer: EventConsumer;
}

function resourceIdOf(event: EventEnvelope): string | null {
  const data = event.data as { task_id?: unknown; item_id?: unknown; hook_id?: unknown };
  const id = { task: data.task_id, hook: data.hook_id, item: data.item_id }[resourceOf(event.type)];
  return typeof id === 'string' ? id : null;
}

/** These events by id, scoped by their companies too (ids are unique anyway; the shard key stays in the filter). */
function eventsFilter(events: EventRef[]): Filter<EventDoc> {
  return {
    company_id: { $in: [...new Set(events.map((event) => event.company_id))] },
    _id: { $in: events.map((event) => event.event_id) },
  };
}

/** The reconciler's record of the mark it last left in Redis (see reconciler.ts). */
interface ReconcileMarkDoc {
  _id: 'redis';
  mark: string;
  updated_at: Date;
}

/** The only code that touches `events` (and `event_reconciliation`, the reconciler's one document). */
export class EventsRepository {
  private readonly events: Collection<EventDoc>;
  private readonly marks: Collection<ReconcileMarkDoc>;
  private readonly retentionMs: number;

  constructor(db: Db, retentionDays = DEFAULT_RETENTION_DAYS) {
    this.events = db.collection<EventDoc>('events');
    this.marks = db.collection<ReconcileMarkDoc>('event_reconciliation');
    this.retentionMs = retentionDays * DAY_MS;
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'events', [
      { key: { company_id: 1, sequence: 1 }, name: 'feed', migratable: true },
      { key: { company_id: 1, resource_id: 1, sequence: 1 }, name: 'feed_resource', migratable: true },
      // The sequencer's work list, oldest recorded first: equality on `unsequenced`, then the sort.
      { key: { unsequenced: 1, recorded_at: 1, _id: 1 }, name: 'unsequenced', sparse: true, migratable: true },
      // Multikey: an event is listed under each consumer that has not finished it.
      { key: { pending: 1, _id: 1 }, name: 'unfinished', migratable: true },
      { key: { unqueued: 1 }, name: 'unqueued', sparse: true, migratable: true },
      { key: { expires_at: 1 }, name: 'retention', expireAfterSeconds: 0, migratable: true },
    ]);
  }

  /** Events older than this are gone for readers, whether or not the TTL monitor has removed them yet. */
  retainedSince(now = new Date()): Date {
    return new Date(now.getTime() - this.retentionMs);
  }

  /**
   * Records events moved out of a document's outbox, in one round trip: unsequenced and unqueued, for
   * the sequencer. An event recorded before (a move repeated after a crash, or by another process) is
   * left as it is.
   */
  async record(events: EventEnvelope[], options: { now?: Date } = {}): Promise<void> {
    if (events.length === 0) return;
    const now = options.now ?? new Date();
    const docs: EventDoc[] = events.map((event) => {
      const occurredAt = new Date(event.occurred_at);
      return {
        _id: event.event_id,
        company_id: event.company_id,
        type: event.type,
        occurred_at: occurredAt,
        resource_id: resourceIdOf(event),
        event,
        pending: [...EVENT_CONSUMERS],
        unqueued: true,
        unsequenced: true,
        recorded_at: now,
        expires_at: new Date(occurredAt.getTime() + this.retentionMs),
      };
    });
    try {
      await this.events.insertMany(docs, { ordered: false });
    } catch (error) {
      if (!duplicateKeyIndexes(error)) throw error;
    }
  }

  /** The sequencer's next batch: events not yet sequenced, oldest recorded first (index-served). */
  findUnsequenced(limit: number): Promise<Array<Pick<EventDoc, '_id' | 'event' | 'unqueued'>>> {
    // Global by design: one sequencer serves every company (docs/scaling.md).
    return this.events
      .find({ unsequenced: true }, { projection: { event: 1, unqueued: 1 } })
      .sort({ recorded_at: 1, _id: 1 })
      .limit(limit)
      .toArray();
  }

  /** Of these events, those still unsequenced (a plan replayed after its sequencer died). */
  unsequencedAmong(events: EventRef[]): Promise<Array<Pick<EventDoc, '_id' | 'event' | 'unqueued'>>> {
    if (events.length === 0) return Promise.resolve([]);
    return this.events
      .find({ ...eventsFilter(events), unsequenced: true }, { projection: { event: 1, unqueued: 1 } })
      .toArray();
  }

  /**
   * Gives events their sequences, in one round trip. Only an event still unsequenced is written, so a
   * plan applied twice (its sequencer died, or was partitioned away, mid-batch) writes each event once;
   * both would write the same values. `queued`: the batch reached the queues.
   */
  async assignSequences(assignments: SequenceAssignment[], queued: boolean): Promise<void> {
    if (assignments.length === 0) return;
    const unset: UpdateFilter<EventDoc>['$unset'] = queued ? { unsequenced: '', unqueued: '' } : { unsequenced: '' };
    await this.events.bulkWrite(
      assignments.map(({ event, sequence, publishJob }) => {
        const set: UpdateFilter<EventDoc>['$set'] = publishJob
          ? { sequence, 'event.sequence': sequence, publish_job: publishJob }
          : { sequence, 'event.sequence': sequence };
        return {
          updateOne: {
            filter: { company_id: event.company_id, _id: event.event_id, unsequenced: true as const },
            update: { $set: set, $unset: unset },
          },
        };
      }),
      { ordered: false },
    );
  }

  /** Events recorded before sequences existed get one too (once, by the first sequencer). */
  async markUnsequencedLegacy(): Promise<number> {
    const result = await this.events.updateMany(
      { sequence: { $exists: false }, unsequenced: { $exists: false } },
      { $set: { unsequenced: true } },
    );
    return result.modifiedCount;
  }

  /** Events whose publishing failed wait for the relay (a later pass publishes everything `unqueued`). */
  markUnqueued(events: EventRef[]): Promise<void> {
    return this.setPerCompany(events, { $set: { unqueued: true } });
  }

  markQueued(events: EventRef[]): Promise<void> {
    return this.setPerCompany(events, { $unset: { unqueued: '' } });
  }

  /** One write per company (all in one round trip), each targeted by company_id (docs/scaling.md). */
  private async setPerCompany(events: EventRef[], update: UpdateFilter<EventDoc>): Promise<void> {
    if (events.length === 0) return;
    const byCompany = new Map<string, string[]>();
    for (const { company_id: companyId, event_id: eventId } of events)
      byCompany.set(companyId, [...(byCompany.get(companyId) ?? []), eventId]);
    await this.events.bulkWrite(
      [...byCompany].map(([companyId, ids]) => ({
        updateMany: { filter: { company_id: companyId, _id: { $in: ids } }, update },
      })),
      { ordered: false },
    );
  }

  /**
   * Events no queue has taken yet, with the consumers still to run them; in no particular order (no sort): a queue
   * promises no order either, and each consumer judges an event on its own.
   */
  findUnqueued(limit: number): Promise<Array<Pick<EventDoc, '_id' | 'event' | 'pending'>>> {
    // Global by design: one indexed query per relay pass (docs/scaling.md).
    // Unsequenced ones are the sequencer's: it publishes them once they have their place in the feed.
    return this.events
      .find({ unqueued: true, unsequenced: { $exists: false } }, { projection: { event: 1, pending: 1 } })
      .limit(limit)
      .toArray();
  }

  /**
   * One write for everything consumers finished together (one round trip), one statement per
   * consumer rather than per event: less for the driver to build and for MongoDB to run.
   */
  async recordFinished(finished: ConsumerFinished[]): Promise<void> {
    if (finished.length === 0) return;
    const byConsumer = new Map<EventConsumer, EventRef[]>();
    for (const { event, consumer } of finished) {
      const events = byConsumer.get(consumer);
      if (events) events.push(event);
      else byConsumer.set(consumer, [event]);
    }
    await this.events.bulkWrite(
      [...byConsumer].map(([consumer, events]) => ({
        updateMany: {
          filter: eventsFilter(events),
          update: { $pull: { pending: consumer } },
        },
      })),
      { ordered: false },
    );
  }

  /** Whether the consumer has already finished the event (an event gone past retention counts as finished). */
  async isFinished(consumer: EventConsumer, event: EventRef): Promise<boolean> {
    return (await this.progressOf(consumer, event)).finished;
  }

  /** Whether the consumer has finished the event, and the batch job it was published in (if any). */
  async progressOf(consumer: EventConsumer, event: EventRef): Promise<{ finished: boolean; publishJob?: string }> {
    const doc = await this.events.findOne(
      { company_id: event.company_id, _id: event.event_id },
      { projection: { pending: 1, publish_job: 1 } },
    );
    return {
      finished: !doc?.pending.includes(consumer),
      ...(doc?.publish_job ? { publishJob: doc.publish_job } : {}),
    };
  }

  /** Of these events, the ids of those the consumer has not finished (one query). */
  async unfinishedAmong(consumer: EventConsumer, events: EventRef[]): Promise<Set<string>> {
    if (events.length === 0) return new Set();
    const open = await this.events
      .find({ ...eventsFilter(events), pending: consumer }, { projection: { _id: 1 } })
      .toArray();
    return new Set(open.map((doc) => doc._id));
  }

  /** A page of the events a consumer has not finished, in event id order (keyset on _id). */
  findUnfinished(
    consumer: EventConsumer,
    afterId: string | undefined,
    limit: number,
  ): Promise<Array<Pick<EventDoc, '_id' | 'event' | 'unqueued'>>> {
    const filter: Filter<EventDoc> = { pending: consumer, ...(afterId ? { _id: { $gt: afterId } } : {}) };
    return this.events
      .find(filter, { projection: { event: 1, unqueued: 1 } })
      .sort({ _id: 1 })
      .hint('unfinished')
      .limit(limit)
      .toArray();
  }

  /**
   * The feed (DECISIONS.md section 13.1): in sequence order after `afterSequence`, up to `readable` (the
   * company's readable position: no event above it is served, even if its sequence is written), within
   * retention.
   */
  list(
    companyId: string,
    filter: EventFeedFilter,
    limit: number,
    range: { afterSequence: number; readable: number },
    now = new Date(),
  ): FindCursor<Pick<EventDoc, '_id' | 'event' | 'sequence'>> {
    const occurred: Record<string, Date> = { $gte: this.retainedSince(now) };
    if (filter.occurredAfter) occurred.$gt = filter.occurredAfter;
    if (filter.occurredBefore) occurred.$lt = filter.occurredBefore;
    const query: Filter<EventDoc> = {
      company_id: companyId,
      ...(filter.resourceId !== undefined ? { resource_id: filter.resourceId } : {}),
      sequence: { $gt: range.afterSequence, $lte: range.readable },
      type: { $in: filter.types },
      occurred_at: occurred,
      ...(filter.excludeActor !== undefined ? { 'event.actor.id': { $ne: filter.excludeActor } } : {}),
    };
    return this.events
      .find<Pick<EventDoc, '_id' | 'event' | 'sequence'>>(query, { projection: { event: 1, sequence: 1 } })
      .sort({ sequence: 1 })
      .limit(limit);
  }

  /**
   * A hook recovery's next events (DECISIONS.md 13.2): the company's events after `afterSequence` up to `upto`
   * (readable when the recovery started), that occurred in [since, until), of these types (all when absent), in
   * sequence order; served by the `feed` index.
   */
  recoveryPage(
    companyId: string,
    range: { afterSequence: number; upto: number; since: Date; until: Date; types?: EventType[] },
    limit: number,
  ): Promise<Array<Pick<EventDoc, '_id' | 'event' | 'sequence'>>> {
    const query: Filter<EventDoc> = {
      company_id: companyId,
      sequence: { $gt: range.afterSequence, $lte: range.upto },
      occurred_at: { $gte: range.since, $lt: range.until },
      ...(range.types ? { type: { $in: range.types } } : {}),
    };
    return this.events
      .find<Pick<EventDoc, '_id' | 'event' | 'sequence'>>(query, { projection: { event: 1, sequence: 1 } })
      .sort({ sequence: 1 })
      .limit(limit)
      .toArray();
  }

  /** One readable event: sequenced (events without a sequence are not readable) and within retention. */
  findById(companyId: string, eventId: string, now = new Date()): Promise<Pick<EventDoc, '_id' | 'event'> | null> {
    return this.events.findOne(
      {
        _id: eventId,
        company_id: companyId,
        sequence: { $exists: true },
        occurred_at: { $gte: this.retainedSince(now) },
      },
      { projection: { event: 1 } },
    );
  }

  /** The ids of every event about a record (erased or not), oldest first; served by feed_resource. */
  async idsAbout(companyId: string, resourceId: string): Promise<string[]> {
    const docs = await this.events
      .find({ company_id: companyId, resource_id: resourceId }, { projection: { _id: 1 } })
      .sort({ sequence: 1 })
      .hint('feed_resource')
      .toArray();
    return docs.map((doc) => doc._id);
  }

  /**
   * Erasure (docs/erasure.md): every event about the record keeps its id, type, sequence, occurred_at and actor,
   * gains `erased: true`, and loses its `data` (left empty) and `changes`. Sequenced or not.
   */
  async eraseAbout(companyId: string, resourceId: string): Promise<void> {
    await this.events.updateMany(
      { company_id: companyId, resource_id: resourceId },
      { $set: { 'event.data': {}, 'event.erased': true, erased: true }, $unset: { 'event.changes': '' } },
    );
  }

  /** The queue jobs that carried the record's events: each event's own id (a job added again) and its batch's. */
  async jobIdsAbout(companyId: string, resourceId: string): Promise<string[]> {
    const docs = await this.events
      .find({ company_id: companyId, resource_id: resourceId }, { projection: { _id: 1, publish_job: 1 } })
      .hint('feed_resource')
      .toArray();
    return [...new Set(docs.flatMap((doc) => (doc.publish_job ? [doc._id, doc.publish_job] : [doc._id])))];
  }

  /** Whether an event about the record still waits for the sequencer (which writes the record's history). */
  async unsequencedAbout(companyId: string, resourceId: string): Promise<boolean> {
    return (
      (await this.events.findOne(
        { company_id: companyId, resource_id: resourceId, unsequenced: true },
        { projection: { _id: 1 } },
      )) !== null
    );
  }

  async readReconcileMark(): Promise<string | null> {
    return (await this.marks.findOne({ _id: 'redis' }))?.mark ?? null;
  }

  async writeReconcileMark(mark: string): Promise<void> {
    await this.marks.updateOne({ _id: 'redis' }, { $set: { mark, updated_at: new Date() } }, { upsert: true });
  }
}
