import { type AnyBulkWriteOperation, type Collection, type Db, type Filter } from 'mongodb';
import { HOOK_PING, type WebhookEnvelope, type WebhookEventType } from '../contracts/envelope.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import { runOnce } from '../shared/migrations.js';
import { duplicateKeyIndexes } from '../shared/mongo.js';
import type { DeliveryJob, DueDelivery } from '../contracts/jobs.js';

export interface DeliveryAttempt {
  attempt: number;
  /** The receiver's status; null when no answer arrived. */
  status_code: number | null;
  /** A DeliveryError category (sender.ts); attempts recorded before categories existed may hold older text (see schemas.ts). */
  error: string | null;
  duration_ms: number;
  succeeded: boolean;
  next_retry_at: Date | null;
  attempted_at: Date;
  /** The start of the receiver's answer as text (sender.ts KEPT_RESPONSE_BYTES); absent on older attempts. */
  response_body?: string | null;
}

/**
 * An attempt as a delivery record holds it: a delivered first attempt's record leaves out its null `error` and
 * `next_retry_at` and its empty `response_body` (deliveredRecord), and reads back with them (recentAttempts).
 */
type StoredAttempt = Omit<DeliveryAttempt, 'error' | 'next_retry_at'> &
  Partial<Pick<DeliveryAttempt, 'error' | 'next_retry_at'>>;

/** One event to one target, with its attempts, and the envelope while it may be sent from here again (keepsEnvelope). */
export interface DeliveryDoc {
  /** `${hook_id}:${event_id}` for hooks, the delivery job id for automation webhooks. */
  _id: string;
  company_id: string;
  /** One of the two is set; the other is null, or absent on a delivered first attempt's record. */
  hook_id?: string | null;
  automation_id?: string | null;
  event_id: string;
  event_type: WebhookEventType;
  /** Absent on a record whose attempts have all succeeded: the event is in `events` (see keepsEnvelope). */
  event?: WebhookEnvelope;
  /**
   * Where the delivery stands (DECISIONS.md 13.2): its latest attempt succeeded, failed with none to follow,
   * or an attempt is due or scheduled. Absent only on records older than the field, until the start-up migration.
   */
  status?: DeliveryStatus;
  /** When an attempt first succeeded, on a record whose status may have changed since (a failed redelivery). */
  delivered_at?: Date;
  /** The hook recovery that scheduled the next attempt, until that attempt is made or skipped (recovery.ts). */
  recovery_pending?: string;
  /** The latest attempts of this delivery, oldest first (capped). */
  attempts: StoredAttempt[];
  /** When the next attempt is due (null or absent when none will follow), and the job that makes it. */
  next_attempt_at?: Date | null;
  job_id?: string;
  target?: DeliveryJob['target'];
  attempts_made?: number;
  /**
   * Absent on a record started by a delivered first attempt (its `attempted_at`), also once later attempts
   * (a redelivery) are appended to it: only an upsert that inserts sets it.
   */
  created_at?: Date;
  updated_at: Date;
}

export const DELIVERY_STATUSES = ['succeeded', 'failed', 'pending'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** What the deliveries list may be narrowed to: a status, and when the latest attempt was made. */
export interface DeliveriesQuery {
  status?: DeliveryStatus;
  since?: Date;
  until?: Date;
}

/** A delivery's status after an attempt. */
export function statusAfter(attempt: Pick<DeliveryAttempt, 'succeeded' | 'next_retry_at'>): DeliveryStatus {
  if (attempt.succeeded) return 'succeeded';
  return attempt.next_retry_at ? 'pending' : 'failed';
}

/** A delivery handed to the `deliveries` queue before its attempt (recordScheduled). */
export interface ScheduledRecord {
  key: string;
  target: DeliveryTarget;
  event: WebhookEnvelope;
  job: DeliveryJob & { id: string };
  /** The hook recovery this attempt is part of (recovery.ts waits for it). */
  recovery?: string;
}

export type DeliveryTarget = { hook_id: string; automation_id: null } | { hook_id: null; automation_id: string };
/** One attempt of one delivery: `key` is the delivery record's id. */
export interface AttemptRecord {
  key: string;
  target: DeliveryTarget;
  event: WebhookEnvelope;
  attempt: DeliveryAttempt;
  /** The job that makes this delivery's attempts: kept so the reconciler can schedule the next one again. */
  job: { id: string; target: DeliveryJob['target'] };
}

export type ListedAttempt = DeliveryAttempt & { event_id: string; event_type: WebhookEventType };

/** The index the deliveries list by status is served from. */
export const HOOK_STATUS_INDEX = 'hook_status';

/** Attempts kept per delivery (retries plus redeliveries); history per hook is bounded by the list limit and the TTL. */
const ATTEMPTS_PER_DELIVERY = 50;
/** Delivery records (and the envelopes in them) are kept this long after their last attempt. */
const RETENTION_SECONDS = 30 * 24 * 3600;

/**
 * Whether an attempt's record keeps the event's envelope. A failed attempt's delivery may be sent again
 * from its record (the next retry after Redis lost its job, a redelivery of a failed delivery: DECISIONS.md
 * section 9), and a ping is recorded nowhere else. A delivered event is in `events` for EVENTS_RETENTION_DAYS,
 * where a redelivery finds it (HooksService.redeliver): a delivered first attempt, most of what the hooks
 * worker writes, leaves the envelope out, half of its record's BSON and the CPU to make it.
 */
function keepsEnvelope(event: WebhookEnvelope, attempt: DeliveryAttempt): boolean {
  return !attempt.succeeded || event.type === HOOK_PING;
}

export function hookDeliveryKey(hookId: string, eventId: string): string {
  return `${hookId}:${eventId}`;
}

/** The only code that touches `deliveries`. */
export class DeliveriesRepository {
  private readonly deliveries: Collection<DeliveryDoc>;

  constructor(db: Db) {
    this.deliveries = db.collection<DeliveryDoc>('deliveries');
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'deliveries', [
      { key: { company_id: 1, hook_id: 1, updated_at: -1 }, name: 'hook_recent', migratable: true },
      { key: { updated_at: 1 }, name: 'retention', expireAfterSeconds: RETENTION_SECONDS, migratable: true },
      { key: { next_attempt_at: 1, _id: 1 }, name: 'next_attempt', migratable: true },
      // Erasure finds the deliveries of a record's events by event (docs/erasure.md).
      { key: { company_id: 1, event_id: 1 }, name: 'event', migratable: true },
      // The deliveries list by status (DECISIONS.md 13.2), newest latest attempt first.
      {
        key: { company_id: 1, hook_id: 1, status: 1, updated_at: -1, _id: -1 },
        name: HOOK_STATUS_INDEX,
        migratable: true,
      },
    ]).then(async (rebuilt) => {
      // Three scans of a large collection: once per database, not at every start of every process.
      await runOnce(db, 'deliveries-status', () =>
        DeliveriesRepository.migrateStatuses(db.collection<DeliveryDoc>('deliveries')),
      );
      return rebuilt;
    });
  }

  /**
   * Records stored before `status` get theirs (once; a no-op after): due ones are pending, records without an
   * envelope are delivered first attempts (keepsEnvelope), the rest take their latest attempt's outcome.
   */
  private static async migrateStatuses(deliveries: Collection<DeliveryDoc>): Promise<void> {
    const unmarked = { status: { $exists: false } };
    await deliveries.updateMany({ ...unmarked, next_attempt_at: { $type: 'date' } }, { $set: { status: 'pending' } });
    await deliveries.updateMany({ ...unmarked, event: { $exists: false } }, { $set: { status: 'succeeded' } });
    const rest = deliveries.find(unmarked, { projection: { attempts: { $slice: -1 }, company_id: 1 } });
    for await (const doc of rest) {
      const last = doc.attempts.at(-1);
      await deliveries.updateOne(
        { company_id: doc.company_id, _id: doc._id, ...unmarked },
        { $set: { status: last?.succeeded ? 'succeeded' : 'failed' } },
      );
    }
  }

  /** The `deliveries` queue jobs that carried these events (a retry's job, kept by BullMQ after it ran). */
  async jobIdsOf(companyId: string, eventIds: string[]): Promise<string[]> {
    if (eventIds.length === 0) return [];
    const docs = await this.deliveries
      .find(
        { company_id: companyId, event_id: { $in: eventIds }, job_id: { $exists: true } },
        { projection: { job_id: 1 } },
      )
      .toArray();
    return [...new Set(docs.flatMap((doc) => (doc.job_id ? [doc.job_id] : [])))];
  }

  /**
   * Erasure (docs/erasure.md): the deliveries of these events keep their attempts' status, timing and error
   * category but lose the envelope and the receivers' answers (which may echo it).
   */
  async eraseEvents(companyId: string, eventIds: string[]): Promise<void> {
    if (eventIds.length === 0) return;
    await this.deliveries.updateMany(
      { company_id: companyId, event_id: { $in: eventIds } },
      { $unset: { event: '' }, $set: { 'attempts.$[].response_body': null } },
    );
  }

  /**
   * Adds each attempt to its delivery record: a first attempt normally starts the record, inserted
   * whole (an insert costs the driver and the server less than an upsert: the hooks worker's
   * figure); a record that exists already (a delivery handed to the `deliveries` lane before its
   * first attempt, a fan-out run again) and every later attempt are appended to. One round trip
   * when the batch is all first attempts or all later ones, two otherwise.
   */
  async recordAttempts(records: AttemptRecord[]): Promise<void> {
    const starting: AttemptRecord[] = [];
    const later: AttemptRecord[] = [];
    const keys = new Set<string>();
    for (const record of records) {
      if (record.attempt.attempt === 1 && !keys.has(record.key)) starting.push(record);
      else later.push(record);
      keys.add(record.key);
    }
    // A started record's later attempts are appended after it; those found existing first of all.
    const existing = await this.insertStarted(starting);
    await this.appendAttempts([...existing, ...later]);
  }

  /** Inserts the records; returns those that existed already (duplicate key), to be appended to. */
  private async insertStarted(records: AttemptRecord[]): Promise<AttemptRecord[]> {
    if (records.length === 0) return [];
    try {
      await this.deliveries.insertMany(records.map(startedDelivery), { ordered: false });
      return [];
    } catch (error) {
      const duplicates = duplicateKeyIndexes(error);
      if (!duplicates) throw error;
      return duplicates.flatMap((index) => records[index] ?? []);
    }
  }

  private async appendAttempts(records: AttemptRecord[]): Promise<void> {
    let rest = records;
    for (let retry = 0; rest.length > 0; retry++) {
      try {
        // Ordered: two attempts of one delivery in one batch land in the order they were made.
        await this.deliveries.bulkWrite(rest.map(attemptUpsert), { ordered: true });
        return;
      } catch (error) {
        // Two first attempts of one delivery at once: MongoDB does not retry this upsert itself (its filter names
        // company_id besides the unique _id), so the loser gets E11000. From that statement on, again: it now matches.
        const failed = duplicateKeyIndexes(error)?.[0];
        if (failed === undefined || retry >= 2) throw error;
        rest = rest.slice(failed);
      }
    }
  }

  /**
   * A delivery handed to the `deliveries` queue before its first attempt (a slow or failing hook):
   * recorded as due now, so the reconciler schedules it again if Redis loses the job. Attempts
   * already made, if any, stay as they are; the next one recorded sets the due time again.
   */
  async recordScheduled(record: ScheduledRecord): Promise<void> {
    await this.recordScheduledMany([record]);
  }

  /** recordScheduled for several deliveries in one round trip (a recovery hands its deliveries over together). */
  async recordScheduledMany(records: ScheduledRecord[]): Promise<void> {
    if (records.length === 0) return;
    const now = new Date();
    const write = () =>
      this.deliveries.bulkWrite(
        records.map(({ key, target, event, job, recovery }) => ({
          updateOne: {
            filter: { company_id: event.company_id, _id: key },
            update: {
              $setOnInsert: {
                ...target,
                event_id: event.event_id,
                event_type: event.type,
                attempts: [],
                created_at: now,
                updated_at: now,
              },
              // The envelope also on a record of delivered attempts (which has none): this attempt is sent from it.
              $set: {
                event,
                next_attempt_at: now,
                job_id: job.id,
                target: job.target,
                attempts_made: job.attempts_before ?? 0,
                status: 'pending' as const,
                ...(recovery ? { recovery_pending: recovery } : {}),
              },
            },
            upsert: true,
          },
        })),
        { ordered: false },
      );
    try {
      await write();
    } catch (error) {
      // Lost a first-insert race with an attempt of the same delivery (see recordAttempts): it matches now.
      if (!duplicateKeyIndexes(error)) throw error;
      await write();
    }
  }

  recordAttempt(record: AttemptRecord): Promise<void> {
    return this.recordAttempts([record]);
  }

  /**
   * The hook's latest attempts, newest first. Each of the `limit` most recently attempted deliveries
   * holds at least one of the `limit` newest attempts, so reading those deliveries is enough.
   */
  async recentAttempts(
    companyId: string,
    hookId: string,
    limit: number,
    query: DeliveriesQuery = {},
  ): Promise<ListedAttempt[]> {
    const docs = await this.recentCursor(companyId, hookId, query, limit).toArray();
    return docs
      .flatMap((doc) =>
        doc.attempts.map((attempt) => ({
          ...attempt,
          error: attempt.error ?? null,
          next_retry_at: attempt.next_retry_at ?? null,
          event_id: doc.event_id,
          event_type: doc.event_type,
        })),
      )
      .sort((a, b) => b.attempted_at.getTime() - a.attempted_at.getTime() || b.attempt - a.attempt)
      .slice(0, limit);
  }

  /**
   * The hook's deliveries, most recently attempted first; with a status, from HOOK_STATUS_INDEX; `since` and
   * `until` bound the latest attempt ([since, until)).
   */
  recentCursor(companyId: string, hookId: string, query: DeliveriesQuery, limit: number) {
    const attempted: { $gte?: Date; $lt?: Date } = {};
    if (query.since) attempted.$gte = query.since;
    if (query.until) attempted.$lt = query.until;
    const filter: Filter<DeliveryDoc> = {
      company_id: companyId,
      hook_id: hookId,
      ...(query.status ? { status: query.status } : {}),
      ...(query.since || query.until ? { updated_at: attempted } : {}),
    };
    return this.deliveries
      .find(filter, { projection: { event: 0 } })
      .sort({ updated_at: -1, _id: -1 })
      .limit(limit);
  }

  /**
   * The hook's delivery of the event, if there was one, with the envelope when the record keeps it
   * (keepsEnvelope: otherwise the event is read from `events`).
   */
  async findHookDelivery(
    companyId: string,
    hookId: string,
    eventId: string,
  ): Promise<{ event?: WebhookEnvelope } | null> {
    return this.deliveries.findOne(
      { _id: hookDeliveryKey(hookId, eventId), company_id: companyId, hook_id: hookId },
      { projection: { _id: 0, event: 1 } },
    );
  }

  /**
   * Deliveries waiting for an attempt (`next_attempt_at` set), a page at a time in (next_attempt_at, _id)
   * order, as the jobs that make those attempts: what the reconciler schedules again after Redis lost
   * its jobs. `after` is the previous page's `next`.
   */
  async dueAttempts(limit: number, after?: string): Promise<{ deliveries: DueDelivery[]; next?: string }> {
    const position = after ? (JSON.parse(after) as [number, string]) : undefined;
    const filter = position
      ? {
          $or: [
            { next_attempt_at: { $gt: new Date(position[0]) } },
            { next_attempt_at: new Date(position[0]), _id: { $gt: position[1] } },
          ],
        }
      : { next_attempt_at: { $gte: new Date(0) } };
    const docs = await this.deliveries
      .find(filter as Filter<DeliveryDoc>, { projection: { attempts: 0 } })
      .sort({ next_attempt_at: 1, _id: 1 })
      .limit(limit)
      .toArray();
    // A due record holds its envelope (keepsEnvelope; recordScheduled sets it).
    const due = docs.filter((doc) => doc.next_attempt_at && doc.job_id && doc.target && doc.event);
    const last = docs[docs.length - 1];
    return {
      deliveries: due.map((doc) => ({
        jobId: doc.job_id!,
        data: { event: doc.event!, target: doc.target!, attempts_before: doc.attempts_made ?? 0 },
        dueAt: doc.next_attempt_at!,
      })),
      next: docs.length === limit && last ? JSON.stringify([last.next_attempt_at!.getTime(), last._id]) : undefined,
    };
  }

  /**
   * Of these deliveries (record ids), what a recovery needs to know: whether an attempt ever succeeded, and the
   * job and attempt count of the last one scheduled. Records that do not exist (never attempted) are absent.
   */
  async recoveryStates(
    companyId: string,
    keys: string[],
  ): Promise<Map<string, { succeeded: boolean; jobId?: string; attemptsMade: number }>> {
    if (keys.length === 0) return new Map();
    const docs = await this.deliveries
      .find(
        { company_id: companyId, _id: { $in: keys } },
        { projection: { status: 1, delivered_at: 1, attempts: 1, job_id: 1, attempts_made: 1 } },
      )
      .toArray();
    return new Map(
      docs.map((doc) => [
        doc._id,
        {
          succeeded: hasSucceeded(doc),
          ...(doc.job_id ? { jobId: doc.job_id } : {}),
          attemptsMade: doc.attempts_made ?? doc.attempts.length,
        },
      ]),
    );
  }

  /** Whether an attempt of this delivery has ever succeeded (a recovery or a retry then sends nothing). */
  async succeeded(companyId: string, key: string): Promise<boolean> {
    const doc = await this.deliveries.findOne(
      { company_id: companyId, _id: key },
      { projection: { status: 1, delivered_at: 1, attempts: 1 } },
    );
    return doc !== null && hasSucceeded(doc);
  }

  /** Of these deliveries, those whose attempt scheduled by the recovery has not been made yet. */
  async awaitingRecovery(companyId: string, keys: string[], recoveryId: string): Promise<Set<string>> {
    if (keys.length === 0) return new Set();
    const docs = await this.deliveries
      .find({ company_id: companyId, _id: { $in: keys }, recovery_pending: recoveryId }, { projection: { _id: 1 } })
      .toArray();
    return new Set(docs.map((doc) => doc._id));
  }

  /**
   * A scheduled attempt that was not made (the delivery had succeeded meanwhile, or its hook is disabled): the
   * record shows what it is now, and no recovery waits for it.
   */
  async attemptSkipped(companyId: string, key: string, status: DeliveryStatus): Promise<void> {
    await this.deliveries.updateOne(
      { company_id: companyId, _id: key },
      { $set: { status, next_attempt_at: null }, $unset: { recovery_pending: '' } },
    );
  }

  async deleteForHook(companyId: string, hookId: string): Promise<void> {
    await this.deliveries.deleteMany({ company_id: companyId, hook_id: hookId });
  }
}

/** Succeeded now, or once before (a later attempt, such as a failed redelivery, may have changed the status). */
function hasSucceeded(doc: Pick<DeliveryDoc, 'status' | 'delivered_at' | 'attempts'>): boolean {
  return doc.status === 'succeeded' || doc.delivered_at !== undefined || doc.attempts.some((a) => a.succeeded);
}

/**
 * The record a delivery's first attempt starts: the same document attemptUpsert makes when it inserts, or, for a
 * delivered one, the compact record of deliveredRecord.
 */
function startedDelivery(record: AttemptRecord): DeliveryDoc {
  const { key, target, event, attempt, job } = record;
  if (!keepsEnvelope(event, attempt)) return deliveredRecord(record);
  return {
    _id: key,
    company_id: event.company_id,
    ...target,
    event_id: event.event_id,
    event_type: event.type,
    event,
    attempts: [attempt],
    status: statusAfter(attempt),
    ...(attempt.succeeded ? { delivered_at: attempt.attempted_at } : {}),
    next_attempt_at: attempt.next_retry_at,
    job_id: job.id,
    target: job.target,
    attempts_made: attempt.attempt,
    created_at: attempt.attempted_at,
    updated_at: attempt.attempted_at,
  };
}

/**
 * A delivered first attempt, most of what the hooks worker writes, as a record of what it needs: nothing is due
 * (no next attempt, job or target to schedule it: dueAttempts skips it), no envelope (keepsEnvelope), and no null
 * or empty fields; the attempt reads back whole (recentAttempts). 379 bytes of BSON instead of 612, and 8
 * top-level fields instead of 13 (`status` included, for the deliveries list's index), for the driver to size
 * and serialize.
 */
function deliveredRecord({ key, target, event, attempt }: AttemptRecord): DeliveryDoc {
  // A delivered attempt's error and next_retry_at are null; its answer is kept when it said anything.
  const { error: _error, next_retry_at: _next, response_body, ...kept } = attempt;
  return {
    _id: key,
    company_id: event.company_id,
    ...(target.hook_id === null ? { automation_id: target.automation_id } : { hook_id: target.hook_id }),
    event_id: event.event_id,
    event_type: event.type,
    attempts: [response_body ? { ...kept, response_body } : kept],
    // No delivered_at: the succeeded attempt itself says so should a later one (a redelivery) change the status.
    status: 'succeeded',
    updated_at: attempt.attempted_at,
  };
}

function attemptUpsert({ key, target, event, attempt, job }: AttemptRecord): AnyBulkWriteOperation<DeliveryDoc> {
  return {
    updateOne: {
      // company_id comes from the filter on insert (and targets the write on a sharded cluster).
      filter: { company_id: event.company_id, _id: key },
      update: {
        $setOnInsert: {
          ...target,
          event_id: event.event_id,
          event_type: event.type,
          created_at: attempt.attempted_at,
        },
        // When the next attempt is due and the job that makes it: what survives Redis losing that job.
        $set: {
          ...(keepsEnvelope(event, attempt) ? { event } : {}),
          updated_at: attempt.attempted_at,
          next_attempt_at: attempt.next_retry_at,
          job_id: job.id,
          target: job.target,
          attempts_made: attempt.attempt,
          status: statusAfter(attempt),
          ...(attempt.succeeded ? { delivered_at: attempt.attempted_at } : {}),
        },
        // The recovery that scheduled this attempt has it made (recovery.ts).
        $unset: { recovery_pending: '' },
        $push: { attempts: { $each: [attempt], $slice: -ATTEMPTS_PER_DELIVERY } },
      },
      upsert: true,
    },
  };
}
