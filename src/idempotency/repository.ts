import { ensureCollectionIndexes } from '../shared/indexes.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import type { Collection, Db } from 'mongodb';

export interface IdempotencyRecord {
  _id: string;
  key_id: string;
  idempotency_key: string;
  request_hash: string;
  state: 'in_progress' | 'completed';
  /** `headers`: the resource headers of the first response (ETag, Location), sent again on replay. */
  response?: { status: number; body: string; content_type: string; headers?: Record<string, string> };
  created_at: Date;
  /**
   * A record is live until then, judged at read time: the TTL index removes it some time later (MongoDB's monitor
   * runs every 60 s, later under load), and until it does an expired record counts as absent.
   */
  expires_at: Date;
}

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** Stored in MongoDB, not Redis, so retries stay safe through a Redis outage (DECISIONS.md section 1). */
export class IdempotencyRepository {
  private readonly collection: Collection<IdempotencyRecord>;

  constructor(db: Db) {
    this.collection = db.collection<IdempotencyRecord>('idempotency_keys');
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'idempotency_keys', [
      { key: { key_id: 1, idempotency_key: 1 }, name: 'key_scope_unique', unique: true },
      { key: { expires_at: 1 }, name: 'expiry_ttl', expireAfterSeconds: 0, migratable: true },
    ]);
  }

  /**
   * Atomically claims (API key, Idempotency-Key); returns the existing live record when someone else has it. An expired
   * record still present is replaced by the new claim (compare-and-set on its expiry, so one claimer wins); `existing:
   * null` means the record changed meanwhile and the caller claims again.
   */
  async claim(
    keyId: string,
    idempotencyKey: string,
    requestHash: string,
  ): Promise<{ claimed: true; id: string } | { claimed: false; existing: IdempotencyRecord | null }> {
    const now = new Date();
    const record: IdempotencyRecord = {
      _id: `${keyId}:${idempotencyKey}`,
      key_id: keyId,
      idempotency_key: idempotencyKey,
      request_hash: requestHash,
      state: 'in_progress',
      created_at: now,
      expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
    };
    try {
      await this.collection.insertOne(record);
      return { claimed: true, id: record._id };
    } catch (error) {
      // Taken: by a live claim, or by an expired one the TTL monitor has not removed yet.
      if (!isDuplicateKeyError(error)) throw error;
    }
    const existing = await this.collection.findOne({ _id: record._id });
    if (!existing || existing.expires_at.getTime() > now.getTime()) return { claimed: false, existing };
    const taken = await this.collection.replaceOne({ _id: record._id, expires_at: existing.expires_at }, record);
    return taken.matchedCount === 1 ? { claimed: true, id: record._id } : { claimed: false, existing: null };
  }

  /** The live record of a claim, or null (absent, or expired but not yet removed by the TTL monitor). */
  async find(id: string): Promise<IdempotencyRecord | null> {
    const record = await this.collection.findOne({ _id: id });
    return record && record.expires_at.getTime() > Date.now() ? record : null;
  }

  async complete(id: string, response: NonNullable<IdempotencyRecord['response']>): Promise<void> {
    await this.collection.updateOne({ _id: id, state: 'in_progress' }, { $set: { state: 'completed', response } });
  }

  /**
   * Erasure (docs/erasure.md): the kept answers of these API keys that mention the record (its id in the body:
   * a create, an update, a batch, a task linked to it). A retry of one runs for real afterwards.
   */
  async eraseMentioning(keyIds: string[], recordId: string): Promise<void> {
    if (keyIds.length === 0) return;
    const mentions = { $regex: recordId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') };
    // Per key, the range of its record ids (`<key_id>:<Idempotency-Key>`, ':' sorts right before ';'): served by
    // _id, so targeted on a cluster sharded by it. One round trip for every key.
    await this.collection.bulkWrite(
      keyIds.map((keyId) => ({
        deleteMany: { filter: { _id: { $gte: `${keyId}:`, $lt: `${keyId};` }, 'response.body': mentions } },
      })),
      { ordered: false },
    );
  }

  /** A request whose answer is not kept (see isKeptForReplay) does not pin its key: a retry runs for real. */
  async release(id: string): Promise<void> {
    await this.collection.deleteOne({ _id: id, state: 'in_progress' });
  }
}
