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
  /** TTL index: records disappear 24 h after the first request. */
  expires_at: Date;
}

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** Stored in MongoDB, not Redis, so retries stay safe through a Redis outage (DECISIONS.md section 1). */
export class IdempotencyRepository {
  private readonly collection: Collection<IdempotencyRecord>;

  constructor(db: Db) {
    this.collection = db.collection<IdempotencyRecord>('idempotency_keys');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('idempotency_keys').createIndexes([
      { key: { key_id: 1, idempotency_key: 1 }, name: 'key_scope_unique', unique: true },
      { key: { expires_at: 1 }, name: 'expiry_ttl', expireAfterSeconds: 0 },
    ]);
  }

  /** Atomically claims (API key, Idempotency-Key); returns the existing record when someone else has it. */
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
      if (!isDuplicateKeyError(error)) throw error;
      return {
        claimed: false,
        existing: await this.collection.findOne({ _id: record._id }),
      };
    }
  }

  find(id: string): Promise<IdempotencyRecord | null> {
    return this.collection.findOne({ _id: id });
  }

  async complete(id: string, response: NonNullable<IdempotencyRecord['response']>): Promise<void> {
    await this.collection.updateOne({ _id: id, state: 'in_progress' }, { $set: { state: 'completed', response } });
  }

  /** A request whose answer is not kept (see isKeptForReplay) does not pin its key: a retry runs for real. */
  async release(id: string): Promise<void> {
    await this.collection.deleteOne({ _id: id, state: 'in_progress' });
  }
}
