import { ensureCollectionIndexes } from '../shared/indexes.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import type { Collection, Db } from 'mongodb';

/**
 * One hook's recovery (DECISIONS.md section 13.2): the events of a period sent again. Kept in MongoDB, not
 * Redis, so a worker that dies mid-way, or Redis losing its data, leaves it to carry on from `position`.
 * One document per hook (`_id` = hook_id): a second recovery while one runs cannot be created.
 */
export interface RecoveryDoc {
  _id: string;
  company_id: string;
  recovery_id: string;
  status: 'running' | 'done' | 'stopped';
  since: Date;
  until: Date;
  /** The company's readable feed position when the recovery started: events after it were delivered as usual. */
  upto_sequence: number;
  /** Every event up to this sequence has been handed to the delivery machinery or found not to need it. */
  position: number;
  /** Events to send again, as counted when the recovery started. */
  queued: number;
  /** Events handed to the delivery machinery so far. */
  sent: number;
  /** The process driving it, until `lease_until`; another takes over once that has passed. */
  holder: string | null;
  lease_until: Date;
  /** Why a recovery stopped before its end: the hook was deleted or disabled. */
  stopped_reason?: string;
  created_at: Date;
  updated_at: Date;
}

export type NewRecovery = Pick<RecoveryDoc, 'company_id' | 'recovery_id' | 'since' | 'until' | 'upto_sequence'>;

/** The only code that touches `hook_recoveries`; every method that acts for a subscriber is scoped by company. */
export class RecoveriesRepository {
  private readonly recoveries: Collection<RecoveryDoc>;

  constructor(db: Db) {
    this.recoveries = db.collection<RecoveryDoc>('hook_recoveries');
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'hook_recoveries', [
      // The runners' work list: running recoveries whose lease has run out, oldest lease first.
      { key: { status: 1, lease_until: 1 }, name: 'runnable', migratable: true },
    ]);
  }

  /**
   * Starts a recovery of the hook unless one runs: returns null then. `startsAt`: when a runner may take it
   * (the request first counts what it will send; should the request die, a runner starts it then).
   */
  async start(hookId: string, recovery: NewRecovery, startsAt: Date, now = new Date()): Promise<RecoveryDoc | null> {
    const doc: Omit<RecoveryDoc, '_id'> = {
      ...recovery,
      status: 'running',
      position: 0,
      queued: 0,
      sent: 0,
      holder: null,
      lease_until: startsAt,
      created_at: now,
      updated_at: now,
    };
    try {
      // Matches only a finished recovery of the hook; a running one makes the upsert insert, which its _id refuses.
      return await this.recoveries.findOneAndUpdate(
        { _id: hookId, company_id: recovery.company_id, status: { $ne: 'running' } },
        { $set: doc, $unset: { stopped_reason: '' } },
        { upsert: true, returnDocument: 'after' },
      );
    } catch (error) {
      if (isDuplicateKeyError(error)) return null;
      throw error;
    }
  }

  findByHook(companyId: string, hookId: string): Promise<RecoveryDoc | null> {
    return this.recoveries.findOne({ _id: hookId, company_id: companyId });
  }

  /** What the request counted; the recovery may start at once. */
  async counted(
    companyId: string,
    hookId: string,
    recoveryId: string,
    queued: number,
    now = new Date(),
  ): Promise<void> {
    await this.recoveries.updateOne(
      { _id: hookId, company_id: companyId, recovery_id: recoveryId, status: 'running' },
      queued === 0
        ? { $set: { queued, status: 'done', updated_at: now } }
        : { $set: { queued, lease_until: now, updated_at: now } },
    );
  }

  /** Takes the running recovery whose lease ran out longest ago (any company: the workers serve them all). */
  claimRunnable(holder: string, leaseMs: number, now = new Date()): Promise<RecoveryDoc | null> {
    return this.recoveries.findOneAndUpdate(
      { status: 'running', lease_until: { $lte: now } },
      { $set: { holder, lease_until: new Date(now.getTime() + leaseMs), updated_at: now } },
      { sort: { lease_until: 1 }, returnDocument: 'after' },
    );
  }

  /**
   * Records progress and extends the lease, only while `holder` still holds it: false when another process
   * has taken the recovery over (this one then stops driving it).
   */
  async progress(
    recovery: Pick<RecoveryDoc, '_id' | 'company_id' | 'recovery_id'>,
    holder: string,
    progress: { position: number; sent: number; leaseMs: number },
    now = new Date(),
  ): Promise<boolean> {
    const result = await this.recoveries.updateOne(
      {
        _id: recovery._id,
        company_id: recovery.company_id,
        recovery_id: recovery.recovery_id,
        holder,
        status: 'running',
      },
      {
        $set: {
          position: progress.position,
          sent: progress.sent,
          lease_until: new Date(now.getTime() + progress.leaseMs),
          updated_at: now,
        },
      },
    );
    return result.matchedCount === 1;
  }

  /** The recovery has handed over its last event (`done`), or cannot go on (`stopped`, with the reason). */
  async finish(
    recovery: Pick<RecoveryDoc, '_id' | 'company_id' | 'recovery_id'>,
    holder: string,
    outcome: { status: 'done' | 'stopped'; reason?: string; position: number; sent: number },
    now = new Date(),
  ): Promise<void> {
    await this.recoveries.updateOne(
      {
        _id: recovery._id,
        company_id: recovery.company_id,
        recovery_id: recovery.recovery_id,
        holder,
        status: 'running',
      },
      {
        $set: {
          status: outcome.status,
          position: outcome.position,
          sent: outcome.sent,
          updated_at: now,
          ...(outcome.reason ? { stopped_reason: outcome.reason } : {}),
        },
      },
    );
  }

  async deleteForHook(companyId: string, hookId: string): Promise<void> {
    await this.recoveries.deleteOne({ _id: hookId, company_id: companyId });
  }
}
