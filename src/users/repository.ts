import { ValidationError } from '../shared/errors.js';
import { ExistenceCache } from '../shared/existence-cache.js';
import { companyScopedKey, newId } from '../shared/ids.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import type { Collection, Db } from 'mongodb';

export interface UserDoc {
  _id: string;
  company_id: string;
  name: string;
  /** As given; uniqueness is case-insensitive through `email_normalized`. */
  email: string;
  email_normalized: string;
  created_at: Date;
}

/**
 * How long a process trusts that a user exists without reading it again. Users are never deleted
 * (there is no route for it), so a remembered user cannot have gone; the bound only limits memory.
 */
const USER_EXISTS_TTL_MS = 60_000;

export class UsersRepository {
  private readonly collection: Collection<UserDoc>;
  private readonly existing = new ExistenceCache(USER_EXISTS_TTL_MS);

  constructor(db: Db) {
    this.collection = db.collection<UserDoc>('users');
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'users', [
      { key: { company_id: 1, email_normalized: 1 }, name: 'company_email_unique', unique: true },
      { key: { company_id: 1, _id: 1 }, name: 'company_id', migratable: true },
    ]);
  }

  async create(companyId: string, input: { name: string; email: string }): Promise<UserDoc> {
    const doc: UserDoc = {
      _id: newId('user'),
      company_id: companyId,
      name: input.name,
      email: input.email,
      email_normalized: input.email.toLowerCase(),
      created_at: new Date(),
    };
    try {
      await this.collection.insertOne(doc);
    } catch (error) {
      if (isDuplicateKeyError(error)) throw ValidationError.single('email', 'a user with this email already exists');
      throw error;
    }
    return doc;
  }

  findById(companyId: string, userId: string): Promise<UserDoc | null> {
    return this.collection.findOne({ company_id: companyId, _id: userId });
  }

  /** Whether the company has this user, from the process's memory when it was seen recently (task assignees). */
  existsCached(companyId: string, userId: string): Promise<boolean> {
    return this.existing.exists(companyScopedKey(companyId, userId), async () =>
      Boolean(await this.collection.findOne({ company_id: companyId, _id: userId }, { projection: { _id: 1 } })),
    );
  }

  list(companyId: string): Promise<UserDoc[]> {
    return this.collection.find({ company_id: companyId }).sort({ _id: 1 }).limit(1000).toArray();
  }
}
