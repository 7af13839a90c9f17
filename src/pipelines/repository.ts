import { AnnouncedCache, type ChangeAnnouncer } from '../shared/change-feeds.js';
import { companyScopedKey, isIdOf } from '../shared/ids.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import type { PipelineDoc, PipelineResponse } from '../contracts/pipelines.js';
import type { Collection, Db, FindCursor } from 'mongodb';

/**
 * The only code that touches `pipelines`. With a change feed, every write is announced and
 * `findCached` serves the request path from memory (items are validated and shaped by their pipeline
 * on every request; pipelines change rarely, through the admin API).
 */
export class PipelinesRepository {
  private readonly collection: Collection<PipelineDoc>;
  private readonly cache: AnnouncedCache<PipelineDoc | null>;

  constructor(
    db: Db,
    private readonly changes?: ChangeAnnouncer,
  ) {
    this.collection = db.collection<PipelineDoc>('pipelines');
    this.cache = new AnnouncedCache(changes);
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'pipelines', [
      { key: { company_id: 1, _id: 1 }, name: 'company_id', migratable: true },
    ]);
  }

  async insert(doc: PipelineDoc): Promise<PipelineDoc> {
    await this.collection.insertOne(doc);
    await this.changes?.announce(cacheKey(doc.company_id, doc._id));
    return doc;
  }

  findById(companyId: string, pipelineId: string): Promise<PipelineDoc | null> {
    return this.collection.findOne({ company_id: companyId, _id: pipelineId });
  }

  /** As findById, from the cache when there is one; the result is shared, never modify it. */
  findCached(companyId: string, pipelineId: string): Promise<PipelineDoc | null> {
    // Only real-looking ids get a cache entry: made-up ones (of any length) cannot fill the cache.
    if (!isIdOf('pipeline', pipelineId)) return Promise.resolve(null);
    return this.cache.get(cacheKey(companyId, pipelineId), () => this.findById(companyId, pipelineId));
  }

  /** In creation order; `afterId`/`limit` page it for integrators, admin screens read up to 1,000. */
  list(companyId: string, afterId?: string, limit = 1_000): Promise<PipelineDoc[]> {
    return this.listCursor(companyId, afterId, limit).toArray();
  }

  /** As list, as a cursor: the external API's page reader stops at its byte budget. */
  listCursor(companyId: string, afterId: string | undefined, limit: number): FindCursor<PipelineDoc> {
    const filter = afterId ? { company_id: companyId, _id: { $gt: afterId } } : { company_id: companyId };
    return this.collection.find(filter).sort({ _id: 1 }).limit(limit);
  }

  /** Compare-and-set on `revision`, so two concurrent admin edits cannot overwrite each other. */
  async replaceIfRevision(companyId: string, expectedRevision: number, next: PipelineDoc): Promise<PipelineDoc | null> {
    const replaced = await this.collection.findOneAndReplace(
      { company_id: companyId, _id: next._id, revision: expectedRevision },
      next,
      { returnDocument: 'after' },
    );
    if (replaced) await this.changes?.announce(cacheKey(companyId, next._id));
    return replaced;
  }
}

function cacheKey(companyId: string, pipelineId: string): string {
  return companyScopedKey(companyId, pipelineId);
}

export function toPipelineResponse(doc: PipelineDoc): PipelineResponse {
  return {
    pipeline_id: doc._id,
    name: doc.name,
    stages: doc.stages,
    statuses: doc.statuses,
    fields: doc.fields.map(({ name, type, required, options }) => ({
      name,
      type,
      required,
      ...(options ? { options } : {}),
    })),
    duplicate_detection: doc.duplicate_detection,
  };
}
