import { createHash } from 'node:crypto';
import { isTaskEvent, typedEvent, type TaskEvent } from '../contracts/company-events.js';
import { AppError } from '../shared/errors.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import { MAX_AUTOMATION_DEPTH } from './schemas.js';
import type { Actor } from '../contracts/auth-context.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { DeliveryJob } from '../contracts/jobs.js';
import type { CreateTaskBody, TaskResponse } from '../contracts/tasks.js';
import type { Logger } from '../shared/logger.js';
import type { AutomationDoc, AutomationsRepository } from './repository.js';
import type { AutomationAction, AutomationConditions } from './schemas.js';

/** The tasks feature's service, as far as an automation's `create_task` action uses it. */
export interface TaskCreator {
  create(actor: Actor, body: CreateTaskBody, options: { depth: number; taskId: string }): Promise<unknown>;
}

/** The items feature's service, as far as an automation's `update_item` action uses it. */
export interface ItemMover {
  update(
    actor: Actor,
    itemId: string,
    changes: { stage_id?: string; status_id?: string },
    ifMatch: undefined,
    options: { depth: number },
  ): Promise<unknown>;
}

export interface AutomationDeps {
  automations: Pick<AutomationsRepository, 'triggeredBy' | 'startRun' | 'finishRun'>;
  tasks: TaskCreator;
  items: ItemMover;
  enqueueDelivery(job: DeliveryJob, jobId: string): Promise<void>;
  logger: Logger;
}

function matches(conditions: AutomationConditions | null, task: TaskResponse): boolean {
  if (!conditions) return true;
  return (Object.keys(conditions) as Array<keyof AutomationConditions>).every(
    (field) => conditions[field] === undefined || conditions[field] === task[field],
  );
}

/** A follow-up task's id is derived from (automation, event, action), so a retried job finds it already made. */
export function followUpTaskId(automationId: string, eventId: string, actionIndex: number): string {
  return `tsk_${createHash('sha256').update(`${automationId}:${eventId}:${actionIndex}`).digest('hex').slice(0, 24)}`;
}

async function runAction(
  action: AutomationAction,
  index: number,
  automation: AutomationDoc,
  event: TaskEvent,
  deps: AutomationDeps,
): Promise<void> {
  const task = event.data;
  const depth = (event.depth ?? 0) + 1;
  const actor = {
    companyId: event.company_id,
    userId: task.created_by,
    cause: { type: 'automation' as const, id: automation._id },
  };
  switch (action.type) {
    case 'webhook':
      await deps.enqueueDelivery(
        { event, target: { kind: 'automation', automation_id: automation._id, url: action.url } },
        `${automation._id}:${event.event_id}:${index}`,
      );
      return;
    case 'create_task': {
      // Due time counts from the event, not from this (possibly retried) run.
      const dueAt = new Date(Date.parse(event.occurred_at) + action.due_in_minutes * 60_000);
      try {
        await deps.tasks.create(
          actor,
          {
            title: action.title,
            due_at: dueAt,
            assigned_to: action.assigned_to ?? task.assigned_to,
            item_id: task.item_id ?? undefined,
            ...(action.task_type ? { task_type: action.task_type } : {}),
            ...(action.priority ? { priority: action.priority } : {}),
          },
          { depth, taskId: followUpTaskId(automation._id, event.event_id, index) },
        );
      } catch (error) {
        if (!isDuplicateKeyError(error)) throw error; // already created by an earlier attempt of this job
      }
      return;
    }
    case 'update_item': {
      if (!task.item_id) return; // nothing to move: the task is not linked to an item
      const changes = {
        ...(action.stage_id ? { stage_id: action.stage_id } : {}),
        ...(action.status_id ? { status_id: action.status_id } : {}),
      };
      // Moving to where the item already is changes nothing, so a retry is harmless.
      await deps.items.update(actor, task.item_id, changes, undefined, { depth });
    }
  }
}

/**
 * Runs the automations a task event triggers (DECISIONS.md section 9): conditions, then actions in
 * order, each run recorded once per (automation, event). Throws when a run failed, so BullMQ retries
 * the job; runs that already succeeded are skipped on the retry.
 */
export async function processAutomationEvent(envelope: EventEnvelope, deps: AutomationDeps): Promise<number> {
  const event = typedEvent(envelope);
  if (!isTaskEvent(event)) return 0;
  const depth = event.depth ?? 0;
  if (depth >= MAX_AUTOMATION_DEPTH) {
    deps.logger.info({ event_id: event.event_id, depth }, 'automation chain depth reached; not running automations');
    return 0;
  }
  const task = event.data;
  let ran = 0;
  let retryable: Error | undefined;
  for (const automation of await deps.automations.triggeredBy(event.company_id, event.type)) {
    if (!matches(automation.conditions, task)) continue;
    const runId = await deps.automations.startRun(automation, event, depth);
    if (!runId) continue;
    ran++;
    try {
      for (const [index, action] of automation.actions.entries())
        await runAction(action, index, automation, event, deps);
      await deps.automations.finishRun(event.company_id, runId, 'succeeded', null);
    } catch (error) {
      const message = error instanceof AppError ? `${error.code}: ${error.detail ?? error.title}` : 'action failed';
      await deps.automations.finishRun(event.company_id, runId, 'failed', message);
      deps.logger.warn(
        { err: error, automation_id: automation._id, event_id: event.event_id },
        'automation run failed',
      );
      // A rejected input (e.g. a stage no longer in the item's pipeline) will not heal by retrying.
      if (!(error instanceof AppError && error.status < 500)) retryable = error as Error;
    }
  }
  if (retryable) throw retryable;
  return ran;
}
