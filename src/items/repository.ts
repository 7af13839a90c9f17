import { nextSequence } from '../shared/counters.js';
import { ExternalIdTakenError } from '../shared/errors.js';
import { ExistenceCache } from '../shared/existence-cache.js';
import { companyScopedKey } from '../shared/ids.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import { duplicateKeyIndexes, isDuplicateKeyError } from '../shared/mongo.js';
import { OUTBOX_INDEX, updateWithEvents, type OutboxOverflow } from '../shared/outbox.js';
import { afterCursor, mongoSort, type SortSpec } from '../shared/pagination.js';
import { SequenceBlocks } from '../shared/sequence-blocks.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { ItemDoc } from '../contracts/items.js';
import type { Collection, Db, Filter } from 'mongodb';

/** What a read of an item leaves out: the outbox's events (its bookkeeping counters stay). */
const ITEM_READ = { pending_events: 0 } as const;

export interface ItemListFilter {
  pipeline_id?: string;
  stage_id?: string;
  status_id?: string;
  contact_id?: string;
  external_id?: string;
  created_after?: Date;
  updated_after?: Date;
  /** Extra conditions of the custom-field filters and `q` (see search.ts). */
  conditions?: Filter<ItemDoc>[];
}

export type ItemChanges = Partial<
  Pick<
    ItemDoc,
    'name' | 'stage_id' | 'status_id' | 'contact_id' | 'source' | 'external_id' | 'custom' | 'dup_tokens' | 'name_words'
  >
>;

/** The indexes that serve custom-field filters and `q` (see search.ts). */
export const CUSTOM_FIELDS_INDEX = 'custom_fields';
export const NAME_WORDS_INDEX = 'name_words';

/** A duplicate key on an insert or update of items is a taken external_id: the only other unique key, short_id, comes from a counter. */
function translateDuplicate(error: unknown): never {
  if (isDuplicateKeyError(error)) throw new ExternalIdTakenError();
  throw error;
}

const SORTABLE = ['created_at', 'updated_at'] as const;
/** Matches live items: archived_at null or absent (items written before archiving existed have none). */
const LIVE = { archived_at: null };
/** The company's live item with this id. */
const liveItem = (companyId: string, itemId: string): Filter<ItemDoc> => ({
  company_id: companyId,
  _id: itemId,
  ...LIVE,
});
const EQUALITY_FILTERS = ['pipeline_id', 'stage_id', 'status_id', 'contact_id'] as const;
/**
 * How long a process trusts that an item is live without reading it again (a task's item_id check).
 * The process that archives an item forgets it at once; other processes may accept a reference to it
 * for at most this long afterwards, which leaves a task pointing at an archived item: a state that
 * archiving an item with tasks creates anyway (its tasks stay, DECISIONS.md section 12.3).
 */
export const ITEM_EXISTS_TTL_MS = 5_000;

export class ItemsRepository {
  readonly collection: Collection<ItemDoc>;

  /** Where a too-full outbox is moved (see updateWithEvents). */
  private readonly eventStore: OutboxOverflow;
  /** Items known to be live, for reference checks (see ITEM_EXISTS_TTL_MS). */
  private readonly existing = new ExistenceCache(ITEM_EXISTS_TTL_MS);

  /** `eventStore`: where a full outbox's events go first (the events repository). */
  private readonly db: Db;
  /** Each company's `short_id` counter (in `counters`), handed out a block at a time. */
  private readonly shortIds: SequenceBlocks;

  constructor(db: Db, eventStore: OutboxOverflow) {
    this.eventStore = eventStore;
    this.collection = db.collection<ItemDoc>('items');
    this.db = db;
    this.shortIds = new SequenceBlocks(db);
  }

  /** The company's next item `short_id`. */
  nextShortId(companyId: string): Promise<number> {
    return this.shortIds.next(`items:${companyId}`);
  }

  /** Reserves `count` consecutive short_ids (a batch create) and returns the last. */
  reserveShortIds(companyId: string, count: number): Promise<number> {
    return nextSequence(this.db, `items:${companyId}`, count);
  }

  /** One index per (equality filter, sort) pair, each ending in _id for keyset ties. */
  static async ensureIndexes(db: Db): Promise<string[]> {
    const listIndexes = SORTABLE.flatMap((sort) => [
      { key: { company_id: 1, [sort]: 1, _id: 1 }, name: `list_${sort}`, migratable: true },
      ...EQUALITY_FILTERS.map((filter) => ({
        key: { company_id: 1, [filter]: 1, [sort]: 1, _id: 1 },
        name: `list_${filter}_${sort}`,
        migratable: true,
      })),
    ]);
    return ensureCollectionIndexes(db, 'items', [
      ...listIndexes,
      { key: { company_id: 1, short_id: 1 }, name: 'company_short_id_unique', unique: true },
      { key: { company_id: 1, pipeline_id: 1, dup_tokens: 1 }, name: 'duplicate_tokens', migratable: true },
      // Unique among items that have one; archiving moves it aside (archived_external_id).
      {
        key: { company_id: 1, external_id: 1 },
        name: 'company_external_id_unique',
        unique: true,
        partialFilterExpression: { external_id: { $type: 'string' } },
      },
      { key: { company_id: 1, name_words: 1 }, name: NAME_WORDS_INDEX, migratable: true },
      // Compound wildcard index (MongoDB 7.0+): serves a filter on any custom field of a pipeline.
      { key: { company_id: 1, pipeline_id: 1, 'custom.$**': 1 }, name: CUSTOM_FIELDS_INDEX, migratable: true },
      { ...OUTBOX_INDEX, migratable: true },
    ]);
  }

  async insert(doc: ItemDoc): Promise<void> {
    await this.collection.insertOne(doc).catch(translateDuplicate);
  }

  /**
   * Inserts many items in one unordered write; each document stands alone. Returns, per document,
   * null when it was stored or the error that kept it out (a taken external_id).
   */
  async insertMany(docs: ItemDoc[]): Promise<Array<ExternalIdTakenError | null>> {
    const outcome: Array<ExternalIdTakenError | null> = docs.map(() => null);
    if (docs.length === 0) return outcome;
    try {
      await this.collection.insertMany(docs, { ordered: false });
    } catch (error) {
      const duplicates = duplicateKeyIndexes(error);
      if (!duplicates) throw error;
      for (const index of duplicates) outcome[index] = new ExternalIdTakenError();
    }
    return outcome;
  }

  findByExternalId(companyId: string, externalId: string): Promise<ItemDoc | null> {
    return this.collection.findOne(
      { company_id: companyId, external_id: externalId, ...LIVE },
      { projection: ITEM_READ },
    );
  }

  /** A live item of the company; an archived one is not found, so it cannot be read, changed or referenced. */
  findById(companyId: string, itemId: string): Promise<ItemDoc | null> {
    return this.collection.findOne(liveItem(companyId, itemId), { projection: ITEM_READ });
  }

  /** Whether the company has this live item, from the process's memory when it was seen recently. */
  existsCached(companyId: string, itemId: string): Promise<boolean> {
    return this.existing.exists(companyScopedKey(companyId, itemId), async () =>
      Boolean(await this.collection.findOne(liveItem(companyId, itemId), { projection: { _id: 1 } })),
    );
  }

  /** The pipeline of an item, archived or not (items never move between pipelines); null when unknown. */
  async pipelineOf(companyId: string, itemId: string): Promise<string | null> {
    const item = await this.collection.findOne(
      { company_id: companyId, _id: itemId },
      { projection: { pipeline_id: 1 } },
    );
    return item?.pipeline_id ?? null;
  }

  /** Archives the item at the version that was read, with its item.deleted event in the same write. */
  async archive(current: ItemDoc, at: Date, events: EventEnvelope[]) {
    // Forgotten before and after: a check running meanwhile must not remember it as live.
    const key = companyScopedKey(current.company_id, current._id);
    this.existing.forget(key);
    try {
      return await updateWithEvents(
        this.collection,
        liveItem(current.company_id, current._id),
        { field: 'version', expected: current.version },
        {
          archived_at: at,
          external_id: null,
          ...(current.external_id ? { archived_external_id: current.external_id } : {}),
        },
        events,
        this.eventStore,
      );
    } finally {
      this.existing.forget(key);
    }
  }

  /**
   * The optimistic lock: one findOneAndUpdate whose filter carries the expected version, so a
   * concurrent writer makes it match nothing instead of being overwritten. Events ride along.
   */
  updateIfVersion(
    companyId: string,
    itemId: string,
    expectedVersion: number,
    changes: ItemChanges,
    updatedAt: Date,
    events: EventEnvelope[],
  ): Promise<ItemDoc | null> {
    return updateWithEvents(
      this.collection,
      liveItem(companyId, itemId),
      { field: 'version', expected: expectedVersion },
      { ...changes, updated_at: updatedAt },
      events,
      this.eventStore,
    ).catch(translateDuplicate);
  }

  /**
   * The list query, as a cursor: the page reader stops at its byte budget (tests explain its plan
   * against a real MongoDB).
   */
  listCursor(
    companyId: string,
    filter: ItemListFilter,
    sort: SortSpec,
    limit: number,
    cursor?: { value: number; id: string },
  ) {
    const query: Filter<ItemDoc> = { company_id: companyId, ...LIVE };
    for (const field of EQUALITY_FILTERS) if (filter[field] !== undefined) query[field] = filter[field];
    // Served by the unique external_id index: at most one item matches.
    if (filter.external_id !== undefined) query.external_id = filter.external_id;
    if (filter.created_after) query.created_at = { $gt: filter.created_after };
    if (filter.updated_after) query.updated_at = { ...(query.updated_at as object), $gt: filter.updated_after };
    const clauses: Filter<ItemDoc>[] = [query, ...(filter.conditions ?? [])];
    if (cursor) clauses.push(afterCursor(sort, cursor) as Filter<ItemDoc>);
    return this.collection
      .find(clauses.length === 1 ? query : { $and: clauses }, {
        projection: { pending_events: 0, dup_tokens: 0, name_words: 0 },
      })
      .sort(mongoSort(sort))
      .limit(limit);
  }

  /**
   * Every live item of the company for an export, in creation order (list_created_at: an item never moves in
   * it, so a write during the read neither skips nor repeats one). Read batch by batch as the caller pulls.
   */
  exportCursor(companyId: string, batchSize: number) {
    return this.collection
      .find({ company_id: companyId, ...LIVE }, { projection: { pending_events: 0, dup_tokens: 0, name_words: 0 } })
      .sort({ created_at: 1, _id: 1 })
      .hint('list_created_at')
      .batchSize(batchSize);
  }

  /** Erasure (docs/erasure.md): the item's document, archived or not, its outbox with it. */
  async erase(companyId: string, itemId: string): Promise<void> {
    this.existing.forget(companyScopedKey(companyId, itemId));
    await this.collection.deleteOne({ company_id: companyId, _id: itemId });
  }

  /** Served by the duplicate_tokens multikey index; newest first. */
  findByTokens(
    companyId: string,
    pipelineId: string,
    tokens: string[],
    match: 'any' | 'all',
    limit: number,
  ): Promise<ItemDoc[]> {
    return this.collection
      .find(
        {
          company_id: companyId,
          pipeline_id: pipelineId,
          ...LIVE,
          dup_tokens: match === 'all' ? { $all: tokens } : { $in: tokens },
        },
        { projection: { pending_events: 0 } },
      )
      .sort({ created_at: -1, _id: -1 })
      .limit(limit)
      .toArray();
  }
}
