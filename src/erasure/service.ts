import { NotFoundError } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { toErasureResponse, type ErasureResponse } from './schemas.js';
import type { Logger } from '../shared/logger.js';
import type { ErasureDoc, ErasureKind, ErasuresRepository } from './repository.js';

export interface ErasureServiceDeps {
  erasures: Pick<ErasuresRepository, 'insert' | 'findById'>;
  /** Whether the company has (or had: archived counts) the record. */
  recordKnown(kind: ErasureKind, companyId: string, id: string): Promise<boolean>;
  /** Adds the job (id = erasure_id); rejects while Redis is away. */
  enqueue(job: { erasure_id: string; company_id: string }): Promise<void>;
  logger: Logger;
}

/** Erasure requests (docs/erasure.md): recorded in MongoDB, then handed to the erasures worker role. */
export class ErasureService {
  constructor(private readonly deps: ErasureServiceDeps) {}

  async request(companyId: string, body: { item_id: string } | { task_id: string }): Promise<ErasureResponse> {
    const [kind, recordId] = 'item_id' in body ? (['item', body.item_id] as const) : (['task', body.task_id] as const);
    if (!(await this.deps.recordKnown(kind, companyId, recordId)))
      throw new NotFoundError(kind === 'item' ? 'Item' : 'Task');
    const doc: ErasureDoc = {
      _id: newId('erasure'),
      company_id: companyId,
      kind,
      record_id: recordId,
      status: 'queued',
      steps_done: [],
      runs: 0,
      requested_at: new Date(),
      started_at: null,
      completed_at: null,
    };
    await this.deps.erasures.insert(doc);
    // Without Redis the request stands: the erasures role queues unfinished erasures again (workers/erasures.ts).
    await this.deps.enqueue({ erasure_id: doc._id, company_id: companyId }).catch((error: unknown) => {
      this.deps.logger.warn({ err: error, erasure_id: doc._id }, 'erasure not queued yet; the erasures role will');
    });
    return toErasureResponse(doc);
  }

  async get(companyId: string, erasureId: string): Promise<ErasureResponse> {
    const doc = erasureId.length <= 100 ? await this.deps.erasures.findById(companyId, erasureId) : null;
    if (!doc) throw new NotFoundError('Erasure');
    return toErasureResponse(doc);
  }
}
