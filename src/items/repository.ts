import type { Collection, Db, Filter } from 'mongodb';
import type { EventEnvelope } from '../events/envelope.js';
import { OUTBOX_INDEX, updateWithEvents, type OutboxFields } from '../events/outbox.js';
import { afterCursor, mongoSort, type SortSpec } from '../shared/pagination.js';
import type { CustomValues } from './custom-fields.js';

export interface ItemDoc extends OutboxFields {
  _id: string;
  company_id: string;
  short_id: string;
  name: string;
  pipeline_id: string;
  stage_id: string;
  status_id: string | null;
  contact_id: string | null;
  source: string;
  /** Custom field values live in their own sub-document so they can never collide with core fields. */
  custom: CustomValues;
  /** Normalised comparable values for the duplicate check (see duplicates.ts). */
  dup_tokens: string[];
  version: number;
  created_at: Date;
  updated_at: Date;
}

export interface ItemListFilter {
  pipeline_id?: string;
  stage_id?: string;
  status_id?: string;
  contact_id?: string;
  created_after?: Date;
  updated_after?: Date;
}

export type ItemChanges = Partial<Pick<ItemDoc, 'name' | 'stage_id' | 'status_id' | 'contact_id' | 'custom' | 'dup_tokens'>>;

const SORTABLE = ['created_at', 'updated_at'] as const;
const EQUALITY_FILTERS = ['pipeline_id', 'stage_id', 'status_id', 'contact_id'] as const;

export class ItemsRepository {
  readonly collection: Collection<ItemDoc>;

  constructor(db: Db) {
    this.collection = db.collection<ItemDoc>('items');
  }

  /** One index per (equality filter, sort) pair, each ending in _id for keyset ties. */
  static async ensureIndexes(db: Db): Promise<void> {
    const listIndexes = SORTABLE.flatMap((sort) => [
      { key: { company_id: 1, [sort]: 1, _id: 1 }, name: `list_${sort}` },
      ...EQUALITY_FILTERS.map((filter) => ({ key: { company_id: 1, [filter]: 1, [sort]: 1, _id: 1 }, name: `list_${filter}_${sort}` })),
    ]);
    await db.collection('items').createIndexes([
      ...listIndexes,
      { key: { company_id: 1, short_id: 1 }, name: 'company_short_id_unique', unique: true },
      { key: { company_id: 1, pipeline_id: 1, dup_tokens: 1 }, name: 'duplicate_tokens' },
      { ...OUTBOX_INDEX },
    ]);
  }

  async insert(doc: ItemDoc): Promise<void> {
    await this.collection.insertOne(doc);
  }

  findById(companyId: string, itemId: string): Promise<ItemDoc | null> {
    return this.collection.findOne({ company_id: companyId, _id: itemId }, { projection: { pending_events: 0 } });
  }

  /**
   * The optimistic lock: one findOneAndUpdate whose filter carries the expected version, so a
   * concurrent writer makes it match nothing instead of being overwritten. Events ride along.
   */
  updateIfVersion(companyId: string, itemId: string, expectedVersion: number, changes: ItemChanges, updatedAt: Date, events: EventEnvelope[]): Promise<ItemDoc | null> {
    return updateWithEvents(this.collection, { company_id: companyId, _id: itemId }, { field: 'version', expected: expectedVersion }, { ...changes, updated_at: updatedAt }, events);
  }

  list(companyId: string, filter: ItemListFilter, sort: SortSpec, limit: number, cursor?: { value: number; id: string }): Promise<ItemDoc[]> {
    const query: Filter<ItemDoc> = { company_id: companyId };
    for (const field of EQUALITY_FILTERS) if (filter[field] !== undefined) query[field] = filter[field];
    if (filter.created_after) query.created_at = { $gt: filter.created_after };
    if (filter.updated_after) query.updated_at = { ...(query.updated_at as object), $gt: filter.updated_after };
    const where = cursor ? { $and: [query, afterCursor(sort, cursor)] } : query;
    return this.collection
      .find(where as Filter<ItemDoc>, { projection: { pending_events: 0, dup_tokens: 0 } })
      .sort(mongoSort(sort))
      .limit(limit)
      .toArray();
  }

  /** Served by the duplicate_tokens multikey index; newest first. */
  findByTokens(companyId: string, pipelineId: string, tokens: string[], match: 'any' | 'all', limit: number): Promise<ItemDoc[]> {
    return this.collection
      .find(
        { company_id: companyId, pipeline_id: pipelineId, dup_tokens: match === 'all' ? { $all: tokens } : { $in: tokens } },
        { projection: { pending_events: 0 } },
      )
      .sort({ created_at: -1, _id: -1 })
      .limit(limit)
      .toArray();
  }
}
