import { NotFoundError, ValidationError, type FieldProblem } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import type { PipelineDoc } from '../contracts/pipelines.js';
import type { TargetGuard } from '../shared/target-guard.js';
import type { AutomationDoc, AutomationRunDoc, AutomationsRepository } from './repository.js';
import type { AutomationAction, AutomationConditions, createAutomationBody, updateAutomationBody } from './schemas.js';
import type { z } from 'zod';

export interface AutomationsServiceDeps {
  automations: Pick<AutomationsRepository, 'insert' | 'findById' | 'update' | 'list' | 'listRuns' | 'remove'>;
  /** The users feature's lookup: whether an assignee is a user of the company. */
  users: { findById(companyId: string, userId: string): Promise<object | null> };
  /** The pipelines feature's list: the stages and statuses an `update_item` action may name. */
  pipelines: { list(companyId: string): Promise<PipelineDoc[]> };
  targetGuard: Pick<TargetGuard, 'problemWithUrl'>;
  /** The hooks feature's signing secret of the company, shown to the admin for webhook actions. */
  webhookSecrets: { forCompany(companyId: string): Promise<string> };
}

/** Automation rules as the admin API manages them; their references always resolve in their own company. */
export class AutomationsService {
  constructor(private readonly deps: AutomationsServiceDeps) {}

  async create(companyId: string, body: z.infer<typeof createAutomationBody>): Promise<AutomationDoc> {
    await this.checkReferences(companyId, body.conditions, body.actions);
    const now = new Date();
    const doc: AutomationDoc = {
      _id: newId('automation'),
      company_id: companyId,
      ...body,
      conditions: body.conditions ?? null,
      created_at: now,
      updated_at: now,
    };
    await this.deps.automations.insert(doc);
    return doc;
  }

  async update(
    companyId: string,
    automationId: string,
    body: z.infer<typeof updateAutomationBody>,
  ): Promise<AutomationDoc> {
    if (!(await this.deps.automations.findById(companyId, automationId))) throw new NotFoundError('Automation');
    await this.checkReferences(companyId, body.conditions, body.actions);
    const updated = await this.deps.automations.update(companyId, automationId, body);
    if (!updated) throw new NotFoundError('Automation');
    return updated;
  }

  list(companyId: string): Promise<AutomationDoc[]> {
    return this.deps.automations.list(companyId);
  }

  /** The latest runs, newest first, of one automation or all of them. */
  listRuns(companyId: string, automationId: string | undefined, limit: number): Promise<AutomationRunDoc[]> {
    return this.deps.automations.listRuns(companyId, automationId, limit);
  }

  /** The whsec_ secret that signs the company's automation `webhook` actions (made on first use). */
  webhookSecret(companyId: string): Promise<string> {
    return this.deps.webhookSecrets.forCompany(companyId);
  }

  async remove(companyId: string, automationId: string): Promise<void> {
    if (!(await this.deps.automations.remove(companyId, automationId))) throw new NotFoundError('Automation');
  }

  /** References in conditions and actions must resolve in the automation's own company; every problem at once. */
  private async checkReferences(
    companyId: string,
    conditions: AutomationConditions | null | undefined,
    actions: AutomationAction[] | undefined,
  ): Promise<void> {
    const { users, pipelines: pipelinesRepo, targetGuard } = this.deps;
    const problems: FieldProblem[] = [];
    if (conditions?.assigned_to && !(await users.findById(companyId, conditions.assigned_to))) {
      problems.push({ path: 'conditions.assigned_to', message: 'is not a user of this company' });
    }
    const pipelines = actions?.some((action) => action.type === 'update_item')
      ? await pipelinesRepo.list(companyId)
      : [];
    for (const [index, action] of (actions ?? []).entries()) {
      if (
        action.type === 'create_task' &&
        action.assigned_to &&
        !(await users.findById(companyId, action.assigned_to))
      ) {
        problems.push({ path: `actions.${index}.assigned_to`, message: 'is not a user of this company' });
      }
      if (action.type === 'update_item') {
        const { stage_id: stageId, status_id: statusId } = action;
        if (stageId && !pipelines.some((pipeline) => pipeline.stages.some((stage) => stage.stage_id === stageId))) {
          problems.push({ path: `actions.${index}.stage_id`, message: 'is not a stage of this company' });
        }
        if (
          statusId &&
          !pipelines.some((pipeline) => pipeline.statuses.some((status) => status.status_id === statusId))
        ) {
          problems.push({ path: `actions.${index}.status_id`, message: 'is not a status of this company' });
        }
      }
      if (action.type === 'webhook') {
        const problem = await targetGuard.problemWithUrl(action.url);
        if (problem) problems.push({ path: `actions.${index}.url`, message: problem });
      }
    }
    ValidationError.throwIfAny(problems);
  }
}
