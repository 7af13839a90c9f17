import { ensureCollectionIndexes } from '../shared/indexes.js';
import { duplicateKeyIndexes } from '../shared/mongo.js';
import type { HistoryRow } from '../contracts/history-rows.js';
import type { HistoryEntryRow } from '../contracts/history.js';
import type { Collection, Db, Filter } from 'mongodb';

export const DEFAULT_HISTORY_RETENTION_DAYS = 365;
const DAY_MS = 24 * 3_600_000;

/**
 * The only code that touches `record_history`: every change of every item and task, written by the
 * sequencer in the batch that makes its event readable (docs/items.md, "History"), kept
 * HISTORY_RETENTION_DAYS, read per record through its own index.
 */
export class HistoryRepository {
  private readonly rows: Collection<HistoryRow>;
  private readonly retentionMs: number;

  constructor(
    db: Db,
    readonly retentionDays = DEFAULT_HISTORY_RETENTION_DAYS,
  ) {
    this.rows = db.collection<HistoryRow>('record_history');
    this.retentionMs = retentionDays * DAY_MS;
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'record_history', [
      // A record's changes newest first, keyset on sequence (unique per company).
      { key: { company_id: 1, resource_id: 1, sequence: -1 }, name: 'record_changes', migratable: true },
      // as_of: the latest change at or before a time.
      { key: { company_id: 1, resource_id: 1, occurred_at: -1, sequence: -1 }, name: 'record_as_of', migratable: true },
      { key: { expires_at: 1 }, name: 'retention', expireAfterSeconds: 0, migratable: true },
    ]);
  }

  /** Changes older than this are gone for readers, whether or not the TTL monitor has removed them yet. */
  retainedSince(now = new Date()): Date {
    return new Date(now.getTime() - this.retentionMs);
  }

  /** Records rows in one round trip; a row written before (same event) is left as it is. */
  async record(rows: HistoryRow[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      await this.rows.insertMany(rows, { ordered: false });
    } catch (error) {
      if (!duplicateKeyIndexes(error)) throw error;
    }
  }

  /** A page of a record's changes, newest first, strictly before `beforeSequence` when given. */
  page(companyId: string, resourceId: string, limit: number, beforeSequence?: number, now = new Date()) {
    const filter: Filter<HistoryRow> = {
      company_id: companyId,
      resource_id: resourceId,
      occurred_at: { $gte: this.retainedSince(now) },
      ...(beforeSequence !== undefined ? { sequence: { $lt: beforeSequence } } : {}),
    };
    return this.rows
      .find<HistoryEntryRow>(filter, { projection: { snapshot: 0, company_id: 0, resource_id: 0, expires_at: 0 } })
      .sort({ sequence: -1 })
      .hint('record_changes')
      .limit(limit);
  }

  /** The record's latest change at or before `at` (within retention), with its snapshot; null when none. */
  latestAt(companyId: string, resourceId: string, at: Date, now = new Date()): Promise<HistoryRow | null> {
    return this.rows.findOne(
      { company_id: companyId, resource_id: resourceId, occurred_at: { $lte: at, $gte: this.retainedSince(now) } },
      { sort: { occurred_at: -1, sequence: -1 }, hint: 'record_as_of' },
    );
  }

  /** Erasure: every row of the record. */
  async eraseRecord(companyId: string, resourceId: string): Promise<number> {
    return (await this.rows.deleteMany({ company_id: companyId, resource_id: resourceId })).deletedCount;
  }
}
