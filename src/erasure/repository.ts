import { ensureCollectionIndexes } from '../shared/indexes.js';
import type { Collection, Db } from 'mongodb';

export type ErasureKind = 'item' | 'task';
export type ErasureStatus = 'queued' | 'running' | 'completed';

/** One erasure request and its progress: it names the record by id only, never by a value of it. */
export interface ErasureDoc {
  /** The erasure_id. */
  _id: string;
  company_id: string;
  kind: ErasureKind;
  record_id: string;
  status: ErasureStatus;
  /** Steps (collections of ERASED_COLLECTIONS) finished, in order: a run after a crash repeats them all anyway. */
  steps_done: string[];
  runs: number;
  requested_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
}

/** The only code that touches `erasures`. */
export class ErasuresRepository {
  private readonly erasures: Collection<ErasureDoc>;

  constructor(db: Db) {
    this.erasures = db.collection<ErasureDoc>('erasures');
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'erasures', [
      { key: { status: 1, requested_at: 1 }, name: 'unfinished', migratable: true },
    ]);
  }

  async insert(doc: ErasureDoc): Promise<void> {
    await this.erasures.insertOne(doc);
  }

  findById(companyId: string, erasureId: string): Promise<ErasureDoc | null> {
    return this.erasures.findOne({ company_id: companyId, _id: erasureId });
  }

  /** A run starts: counted, and `running` unless it has completed already (then null: nothing to do). */
  start(companyId: string, erasureId: string): Promise<ErasureDoc | null> {
    return this.erasures.findOneAndUpdate(
      { company_id: companyId, _id: erasureId, status: { $ne: 'completed' } },
      { $set: { status: 'running', started_at: new Date() }, $inc: { runs: 1 } },
      { returnDocument: 'after' },
    );
  }

  async stepDone(companyId: string, erasureId: string, step: string): Promise<void> {
    await this.erasures.updateOne({ company_id: companyId, _id: erasureId }, { $addToSet: { steps_done: step } });
  }

  /** Completes the erasure; true only for the run that completed it (it reports `completed` once). */
  async complete(companyId: string, erasureId: string): Promise<boolean> {
    const result = await this.erasures.updateOne(
      { company_id: companyId, _id: erasureId, status: { $ne: 'completed' } },
      { $set: { status: 'completed', completed_at: new Date() } },
    );
    return result.modifiedCount === 1;
  }

  /** Erasures not completed and requested before `before` (their job may have been lost with Redis): global, indexed. */
  unfinished(before: Date, limit: number): Promise<Array<Pick<ErasureDoc, '_id' | 'company_id'>>> {
    return this.erasures
      .find(
        { status: { $in: ['queued', 'running'] }, requested_at: { $lt: before } },
        { projection: { company_id: 1 } },
      )
      .sort({ requested_at: 1 })
      .limit(limit)
      .toArray();
  }
}
