import { ensureCollectionIndexes } from '../shared/indexes.js';
import type { Scope } from '../contracts/scopes.js';
import type { Collection, Db } from 'mongodb';

export interface ApiKeyDoc {
  _id: string;
  company_id: string;
  name: string;
  /** Display prefix only (`prk_AbCd1234`); the value itself is never stored. */
  prefix: string;
  /** SHA-256 of the value: enough to authenticate, useless to an attacker who reads the database. */
  key_hash: string;
  scopes: Scope[];
  expires_at: Date | null;
  created_by: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export class ApiKeysRepository {
  private readonly collection: Collection<ApiKeyDoc>;

  constructor(db: Db) {
    this.collection = db.collection<ApiKeyDoc>('api_keys');
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'api_keys', [
      { key: { key_hash: 1 }, name: 'key_hash_unique', unique: true },
      { key: { company_id: 1, _id: 1 }, name: 'company_id', migratable: true },
    ]);
  }

  async insert(doc: ApiKeyDoc): Promise<void> {
    await this.collection.insertOne(doc);
  }

  /** Authentication looks a key up by its hash through the unique index; the company comes from the key. */
  findByHash(keyHash: string): Promise<ApiKeyDoc | null> {
    return this.collection.findOne({ key_hash: keyHash });
  }

  findById(companyId: string, keyId: string): Promise<ApiKeyDoc | null> {
    return this.collection.findOne({ company_id: companyId, _id: keyId });
  }

  list(companyId: string): Promise<ApiKeyDoc[]> {
    return this.collection.find({ company_id: companyId }).sort({ _id: 1 }).limit(1000).toArray();
  }

  rename(companyId: string, keyId: string, name: string): Promise<ApiKeyDoc | null> {
    return this.collection.findOneAndUpdate(
      { company_id: companyId, _id: keyId },
      { $set: { name } },
      { returnDocument: 'after' },
    );
  }

  /** Revoking twice keeps the first revocation time. Returns false when the key does not exist in the company. */
  async revoke(companyId: string, keyId: string): Promise<boolean> {
    const result = await this.collection.updateOne(
      { company_id: companyId, _id: keyId, revoked_at: null },
      { $set: { revoked_at: new Date() } },
    );
    return result.matchedCount === 1 || (await this.findById(companyId, keyId)) !== null;
  }

  async recordLastUsed(entries: Array<{ companyId: string; keyId: string; usedAt: Date }>): Promise<void> {
    if (entries.length === 0) return;
    await this.collection.bulkWrite(
      entries.map(({ companyId, keyId, usedAt }) => ({
        updateOne: { filter: { company_id: companyId, _id: keyId }, update: { $max: { last_used_at: usedAt } } },
      })),
      { ordered: false },
    );
  }
}
