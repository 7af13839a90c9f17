import { isDuplicateKeyError } from '../shared/mongo.js';
import type { Collection, Db } from 'mongodb';

/** One event's place in its company's feed, as a plan records it before anything is written. */
export interface PlannedSequence {
  event_id: string;
  company_id: string;
  sequence: number;
  /** The batch job it is published in, when no queue had it yet. */
  publish_job?: string;
}

/**
 * What the sequencer is about to write, recorded under its lease before it writes anything: a holder
 * that takes over applies the plan it finds first (same sequences, same job ids), so a batch its
 * predecessor left halfway is finished, never assigned twice.
 */
export interface SequencePlan {
  events: PlannedSequence[];
  /** Per company, the highest sequence of the batch: readable once every event of the plan is written. */
  readable: Array<{ company_id: string; sequence: number }>;
}

/** The single sequencer's lease (DECISIONS.md section 13.1, docs/events.md "The change feed"). */
interface LeaseDoc {
  _id: 'sequencer';
  /** Grows with every new holder: only the current epoch may record a plan. */
  epoch: number;
  holder: string;
  expires_at: Date;
  plan?: SequencePlan | null;
  /** Events recorded before sequences existed were queued for sequencing once. */
  legacy_marked?: true;
}

/** A company's feed position: sequences handed out (`reserved`) and the highest readable one. */
interface SequenceDoc {
  _id: string;
  reserved: number;
  readable: number;
}

export interface HeldLease {
  epoch: number;
  plan: SequencePlan | null;
  legacyMarked: boolean;
}

/** The only code that touches `event_sequencer` (the lease) and `event_sequences` (per company). */
export class SequencerStore {
  private readonly leases: Collection<LeaseDoc>;
  private readonly sequences: Collection<SequenceDoc>;

  constructor(db: Db) {
    this.leases = db.collection<LeaseDoc>('event_sequencer');
    this.sequences = db.collection<SequenceDoc>('event_sequences');
  }

  /**
   * Takes the lease when it is free (never held, or expired): a new holder waits out the old lease.
   * Returns the new epoch and the plan the last holder left (null when it finished its batch).
   */
  async acquire(holder: string, leaseMs: number, now = new Date()): Promise<HeldLease | null> {
    try {
      const lease = await this.leases.findOneAndUpdate(
        { _id: 'sequencer', expires_at: { $lte: now } },
        { $set: { holder, expires_at: new Date(now.getTime() + leaseMs) }, $inc: { epoch: 1 } },
        { upsert: true, returnDocument: 'after' },
      );
      return lease
        ? { epoch: lease.epoch, plan: lease.plan ?? null, legacyMarked: lease.legacy_marked === true }
        : null;
    } catch (error) {
      // Held by another (the upsert met the existing document): not ours.
      if (isDuplicateKeyError(error)) return null;
      throw error;
    }
  }

  /** Extends the lease; false when another holder has taken it meanwhile. */
  async renew(holder: string, epoch: number, leaseMs: number, now = new Date()): Promise<boolean> {
    const result = await this.leases.updateOne(
      { _id: 'sequencer', epoch, holder },
      { $set: { expires_at: new Date(now.getTime() + leaseMs) } },
    );
    return result.matchedCount === 1;
  }

  /** Lets the next holder in at once (a clean shutdown). */
  async release(holder: string, epoch: number): Promise<void> {
    await this.leases.updateOne({ _id: 'sequencer', epoch, holder }, { $set: { expires_at: new Date(0) } });
  }

  /** Records the plan under the epoch; false when the epoch is no longer the current one (lease lost). */
  async recordPlan(epoch: number, plan: SequencePlan | null): Promise<boolean> {
    const result = await this.leases.updateOne({ _id: 'sequencer', epoch }, { $set: { plan } });
    return result.matchedCount === 1;
  }

  async markLegacyDone(epoch: number): Promise<void> {
    await this.leases.updateOne({ _id: 'sequencer', epoch }, { $set: { legacy_marked: true } });
  }

  /** Hands out `count` sequences of the company (one `$inc`); returns the highest of them. */
  async reserve(companyId: string, count: number): Promise<number> {
    const doc = await this.sequences.findOneAndUpdate(
      { _id: companyId },
      { $inc: { reserved: count }, $setOnInsert: { readable: 0 } },
      { upsert: true, returnDocument: 'after' },
    );
    if (!doc) throw new Error('sequence reservation returned no document');
    return doc.reserved;
  }

  /** Makes everything up to each sequence readable (never moves back). */
  async markReadable(readable: SequencePlan['readable']): Promise<void> {
    if (readable.length === 0) return;
    await this.sequences.bulkWrite(
      readable.map(({ company_id: companyId, sequence }) => ({
        updateOne: { filter: { _id: companyId }, update: { $max: { readable: sequence } } },
      })),
      { ordered: false },
    );
  }

  /** The company's readable position: the feed serves no event above it. */
  async readableOf(companyId: string): Promise<number> {
    return (await this.sequences.findOne({ _id: companyId }, { projection: { readable: 1 } }))?.readable ?? 0;
  }

  /** The readable positions of several companies, in one query. */
  async readableOfMany(companyIds: string[]): Promise<Map<string, number>> {
    if (companyIds.length === 0) return new Map();
    const docs = await this.sequences.find({ _id: { $in: companyIds } }, { projection: { readable: 1 } }).toArray();
    return new Map(docs.map((doc) => [doc._id, doc.readable]));
  }
}
