import type { Collection, Db } from 'mongodb';
import type { DuplicateDetection, FieldDefinition, PipelineResponse } from './schemas.js';

export interface StageDoc {
  stage_id: string;
  name: string;
  position: number;
}

export interface StatusDoc {
  status_id: string;
  name: string;
}

export interface PipelineDoc {
  _id: string;
  company_id: string;
  name: string;
  stages: StageDoc[];
  statuses: StatusDoc[];
  fields: FieldDefinition[];
  duplicate_detection: DuplicateDetection;
  /** Bumped on every change; caches keyed by it (e.g. compiled metadata schemas) never go stale. */
  revision: number;
  created_at: Date;
  updated_at: Date;
}

export class PipelinesRepository {
  private readonly collection: Collection<PipelineDoc>;

  constructor(db: Db) {
    this.collection = db.collection<PipelineDoc>('pipelines');
  }

  static async ensureIndexes(db: Db): Promise<void> {
    await db.collection('pipelines').createIndexes([{ key: { company_id: 1, _id: 1 }, name: 'company_id' }]);
  }

  async insert(doc: PipelineDoc): Promise<PipelineDoc> {
    await this.collection.insertOne(doc);
    return doc;
  }

  findById(companyId: string, pipelineId: string): Promise<PipelineDoc | null> {
    return this.collection.findOne({ company_id: companyId, _id: pipelineId });
  }

  /** In creation order; `afterId`/`limit` page it for integrators, admin screens read up to 1,000. */
  list(companyId: string, afterId?: string, limit = 1_000): Promise<PipelineDoc[]> {
    const filter = afterId ? { company_id: companyId, _id: { $gt: afterId } } : { company_id: companyId };
    return this.collection.find(filter).sort({ _id: 1 }).limit(limit).toArray();
  }

  /** Compare-and-set on `revision`, so two concurrent admin edits cannot overwrite each other. */
  replaceIfRevision(companyId: string, expectedRevision: number, next: PipelineDoc): Promise<PipelineDoc | null> {
    return this.collection.findOneAndReplace(
      { company_id: companyId, _id: next._id, revision: expectedRevision },
      next,
      { returnDocument: 'after' },
    );
  }
}

export function toPipelineResponse(doc: PipelineDoc): PipelineResponse {
  return {
    pipeline_id: doc._id,
    name: doc.name,
    stages: doc.stages,
    statuses: doc.statuses,
    fields: doc.fields.map(({ name, type, required, options }) => ({ name, type, required, ...(options ? { options } : {}) })),
    duplicate_detection: doc.duplicate_detection,
  };
}
