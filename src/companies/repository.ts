import { newId } from '../shared/ids.js';
import type { Collection, Db } from 'mongodb';

export type SubscriptionStatus = 'active' | 'inactive';

export interface CompanyDoc {
  _id: string;
  name: string;
  subscription_status: SubscriptionStatus;
  created_at: Date;
  updated_at: Date;
}

/** Companies are the tenants themselves, so this is the one repository not scoped by company. */
export class CompaniesRepository {
  private readonly collection: Collection<CompanyDoc>;

  constructor(db: Db) {
    this.collection = db.collection<CompanyDoc>('companies');
  }

  static ensureIndexes(_db: Db): Promise<string[]> {
    return Promise.resolve([]); // looked up by _id only
  }

  async create(input: { name: string; subscription_status: SubscriptionStatus }): Promise<CompanyDoc> {
    const now = new Date();
    const doc: CompanyDoc = { _id: newId('company'), ...input, created_at: now, updated_at: now };
    await this.collection.insertOne(doc);
    return doc;
  }

  findById(companyId: string): Promise<CompanyDoc | null> {
    return this.collection.findOne({ _id: companyId });
  }

  async update(
    companyId: string,
    changes: Partial<Pick<CompanyDoc, 'name' | 'subscription_status'>>,
  ): Promise<CompanyDoc | null> {
    return this.collection.findOneAndUpdate(
      { _id: companyId },
      { $set: { ...changes, updated_at: new Date() } },
      { returnDocument: 'after' },
    );
  }
}
