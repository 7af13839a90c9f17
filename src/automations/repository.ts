import { ensureCollectionIndexes } from '../shared/indexes.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import { toIso } from '../shared/time.js';
import type { TaskEventType } from '../contracts/envelope.js';
import type { AutomationAction, AutomationConditions } from './schemas.js';
import type { Collection, Db } from 'mongodb';

export interface AutomationDoc {
  _id: string;
  company_id: string;
  name: string;
  enabled: boolean;
  trigger: TaskEventType;
  conditions: AutomationConditions | null;
  actions: AutomationAction[];
  created_at: Date;
  updated_at: Date;
  deleted_at?: Date;
}

export interface AutomationRunDoc {
  /** `${automation_id}:${event_id}`: one run per automation and event, however often the job runs. */
  _id: string;
  company_id: string;
  automation_id: string;
  event_id: string;
  event_type: string;
  status: 'running' | 'succeeded' | 'failed';
  error: string | null;
  depth: number;
  attempts: number;
  started_at: Date;
  finished_at: Date | null;
}

export class AutomationsRepository {
  private readonly automations: Collection<AutomationDoc>;
  private readonly runs: Collection<AutomationRunDoc>;

  constructor(db: Db) {
    this.automations = db.collection<AutomationDoc>('automations');
    this.runs = db.collection<AutomationRunDoc>('automation_runs');
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    const rebuilt = await ensureCollectionIndexes(db, 'automations', [
      { key: { company_id: 1, trigger: 1, enabled: 1 }, name: 'company_trigger', migratable: true },
    ]);
    return [
      ...rebuilt,
      ...(await ensureCollectionIndexes(db, 'automation_runs', [
        { key: { company_id: 1, started_at: -1, _id: -1 }, name: 'company_recent', migratable: true },
        {
          key: { company_id: 1, automation_id: 1, started_at: -1, _id: -1 },
          name: 'company_automation_recent',
          migratable: true,
        },
      ])),
    ];
  }

  async insert(doc: AutomationDoc): Promise<void> {
    await this.automations.insertOne(doc);
  }

  findById(companyId: string, automationId: string): Promise<AutomationDoc | null> {
    return this.automations.findOne({ company_id: companyId, _id: automationId, deleted_at: { $exists: false } });
  }

  list(companyId: string): Promise<AutomationDoc[]> {
    return this.automations
      .find({ company_id: companyId, deleted_at: { $exists: false } })
      .sort({ _id: 1 })
      .limit(1000)
      .toArray();
  }

  /**
   * The enabled automations an event of this type triggers, oldest first: they run one after another, so when two
   * change the same thing the newer one has the last word. Sorted, because MongoDB promises no order without a sort.
   */
  triggeredBy(companyId: string, trigger: string): Promise<AutomationDoc[]> {
    return this.automations
      .find({ company_id: companyId, trigger: trigger as TaskEventType, enabled: true, deleted_at: { $exists: false } })
      .sort({ _id: 1 })
      .toArray();
  }

  update(companyId: string, automationId: string, changes: Partial<AutomationDoc>): Promise<AutomationDoc | null> {
    return this.automations.findOneAndUpdate(
      { company_id: companyId, _id: automationId, deleted_at: { $exists: false } },
      { $set: { ...changes, updated_at: new Date() } },
      { returnDocument: 'after' },
    );
  }

  /** Soft delete: its past runs keep pointing at something. */
  async remove(companyId: string, automationId: string): Promise<boolean> {
    const result = await this.automations.updateOne(
      { company_id: companyId, _id: automationId, deleted_at: { $exists: false } },
      { $set: { deleted_at: new Date(), enabled: false } },
    );
    return result.matchedCount === 1;
  }

  /**
   * Starts (or resumes, on a retried job) the run of an automation for an event. Returns null when
   * that run already succeeded, so a redelivered job does nothing.
   */
  async startRun(
    automation: AutomationDoc,
    event: { event_id: string; type: string },
    depth: number,
  ): Promise<string | null> {
    const runId = `${automation._id}:${event.event_id}`;
    try {
      await this.runs.updateOne(
        // company_id comes from the filter on insert (and targets the write on a sharded cluster).
        { company_id: automation.company_id, _id: runId, status: { $ne: 'succeeded' } },
        {
          $setOnInsert: {
            automation_id: automation._id,
            event_id: event.event_id,
            event_type: event.type,
            depth,
            started_at: new Date(),
          },
          $set: { status: 'running', error: null, finished_at: null },
          $inc: { attempts: 1 },
        },
        { upsert: true },
      );
      return runId;
    } catch (error) {
      // The filter excluded a succeeded run, so the upsert collided with it on _id.
      if (isDuplicateKeyError(error)) return null;
      throw error;
    }
  }

  async finishRun(
    companyId: string,
    runId: string,
    status: 'succeeded' | 'failed',
    error: string | null,
  ): Promise<void> {
    await this.runs.updateOne(
      { company_id: companyId, _id: runId },
      { $set: { status, error, finished_at: new Date() } },
    );
  }

  listRuns(companyId: string, automationId: string | undefined, limit: number): Promise<AutomationRunDoc[]> {
    return this.runs
      .find({ company_id: companyId, ...(automationId ? { automation_id: automationId } : {}) })
      .sort({ started_at: -1, _id: -1 })
      .limit(limit)
      .toArray();
  }
}

export function toAutomationResponse(doc: AutomationDoc) {
  return {
    automation_id: doc._id,
    name: doc.name,
    enabled: doc.enabled,
    trigger: doc.trigger,
    conditions: doc.conditions,
    actions: doc.actions,
    created_at: toIso(doc.created_at),
    updated_at: toIso(doc.updated_at),
  };
}

export function toRunResponse(doc: AutomationRunDoc) {
  return {
    run_id: doc._id,
    automation_id: doc.automation_id,
    event_id: doc.event_id,
    event_type: doc.event_type,
    status: doc.status,
    error: doc.error,
    depth: doc.depth,
    started_at: toIso(doc.started_at),
    finished_at: toIso(doc.finished_at),
  };
}
