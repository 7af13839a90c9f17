import { z } from 'zod';
import { limitSchema } from '../shared/pagination.js';
import { isoTimestampInput, isoTimestampOutput, isoTimestampQuery, toIso } from '../shared/time.js';
import { TASK_PRIORITIES, TASK_TYPES } from './task-kinds.js';
import type { OutboxFields } from '../shared/outbox.js';
import type { EventEnvelope } from './envelope.js';
import type { TaskPriority, TaskType } from './task-kinds.js';

/** One entity schema; its keys are exactly the spec's Task table, in that order (DECISIONS.md section 8). */
const MAX_MINUTES = 525_600; // one year
const minutes = z.number().int().min(0).max(MAX_MINUTES).describe('Minutes, null when not set').meta({ example: 30 });

/** The task of the reference's examples, written once: the events feed and webhook payloads reuse it. */
export const TASK_EXAMPLE = {
  task_id: 'tsk_6740b7a1c2d3e4f5a6b7c8d9',
  title: 'Call Acme about renewal',
  due_at: '2026-11-22T09:30:00.000Z',
  assigned_to: 'usr_6740b7a1c2d3e4f5a6b7c8d0',
  description: null,
  priority: 'high',
  task_type: 'call',
  item_id: 'itm_6740b7a1c2d3e4f5a6b7c8d1',
  duration_minutes: 30,
  reminder_minutes: 15,
  notes: null,
  is_completed: false,
  created_by: 'usr_6740b7a1c2d3e4f5a6b7c8d0',
  completed_at: null,
  created_at: '2026-11-20T08:00:00.000Z',
  updated_at: '2026-11-20T08:00:00.000Z',
};

/** The same task completed, with the changes of its task.completed event (feed and webhook examples). */
export const TASK_COMPLETED_EXAMPLE = {
  data: {
    ...TASK_EXAMPLE,
    is_completed: true,
    completed_at: '2026-11-20T08:30:00.000Z',
    updated_at: '2026-11-20T08:30:00.000Z',
  },
  changes: {
    is_completed: { from: false, to: true },
    completed_at: { from: null, to: '2026-11-20T08:30:00.000Z' },
  },
};

export const taskSchema = z
  .object({
    task_id: z.string(),
    title: z.string(),
    due_at: isoTimestampOutput,
    assigned_to: z.string().describe('user_id of the assignee'),
    description: z.string().nullable(),
    priority: z.enum(TASK_PRIORITIES),
    task_type: z.enum(TASK_TYPES),
    item_id: z.string().nullable().describe('Linked item, null when none'),
    duration_minutes: minutes
      .nullable()
      .describe('How long the task takes, in minutes; null when not set')
      .meta({ example: 30 }),
    reminder_minutes: minutes
      .nullable()
      .describe('Minutes before due_at to remind the assignee; null for no reminder')
      .meta({ example: 15 }),
    notes: z.string().nullable().describe('null when empty'),
    is_completed: z.boolean(),
    created_by: z.string().describe('user who created the API key used'),
    completed_at: isoTimestampOutput.nullable().describe('null while not completed'),
    created_at: isoTimestampOutput,
    updated_at: isoTimestampOutput,
  })
  .meta({
    id: 'Task',
    example: TASK_EXAMPLE,
  });

export type TaskResponse = z.infer<typeof taskSchema>;

const reference = z.string().min(1).max(100);
const longText = z.string().max(10_000);
const notes = longText.nullable().describe('an empty string is stored as null');

/**
 * Defaults (priority none, task_type to_do, assigned_to = the key's creator, ...) are applied by the
 * service, not here, so callers without HTTP (the automation worker) can build a body directly.
 */
export const createTaskBody = z
  .strictObject({
    title: z.string().trim().min(1).max(500),
    due_at: isoTimestampInput,
    assigned_to: reference.optional().describe('user_id; defaults to the user who created the API key'),
    description: longText.nullable().optional(),
    priority: z.enum(TASK_PRIORITIES).optional().describe('default none'),
    task_type: z.enum(TASK_TYPES).optional().describe('default to_do'),
    item_id: reference.nullable().optional(),
    duration_minutes: minutes.nullable().optional(),
    reminder_minutes: minutes.nullable().optional(),
    notes: notes.optional(),
    is_completed: z.boolean().optional().describe('default false; true sets completed_at'),
  })
  .meta({
    example: {
      title: 'Call Acme about renewal',
      due_at: '2026-11-22T10:30:00+01:00',
      priority: 'high',
      task_type: 'call',
    },
  });

/** Any writable field; null clears an optional one. */
export const updateTaskBody = z
  .strictObject({
    title: z.string().trim().min(1).max(500).optional(),
    due_at: isoTimestampInput.optional(),
    assigned_to: reference.optional(),
    description: longText.nullable().optional(),
    priority: z.enum(TASK_PRIORITIES).optional(),
    task_type: z.enum(TASK_TYPES).optional(),
    item_id: reference.nullable().optional(),
    duration_minutes: minutes.nullable().optional(),
    reminder_minutes: minutes.nullable().optional(),
    notes: notes.optional(),
    is_completed: z.boolean().optional().describe('false→true sets completed_at, true→false clears it'),
  })
  .meta({ example: { is_completed: true, notes: 'Signed.' } });

export type CreateTaskBody = z.infer<typeof createTaskBody>;
export type UpdateTaskBody = z.infer<typeof updateTaskBody>;

export const TASK_SORTS = ['due_at', '-due_at', 'created_at', '-created_at'] as const;

const booleanParam = z.enum(['true', 'false']).transform((value) => value === 'true');

export const listTasksQuery = z.strictObject({
  is_completed: booleanParam.optional(),
  assigned_to: z.string().optional(),
  item_id: z.string().optional(),
  due_before: isoTimestampQuery.optional(),
  due_after: isoTimestampQuery.optional(),
  updated_after: isoTimestampQuery.optional(),
  task_type: z.enum(TASK_TYPES).optional(),
  priority: z.enum(TASK_PRIORITIES).optional(),
  // overdue=false is the exact complement (completed, or due_at not yet passed), so true and false partition the list.
  overdue: booleanParam.optional().describe('true: open tasks whose due_at has passed; false: all others'),
  sort: z.enum(TASK_SORTS).default('due_at'),
  limit: limitSchema,
  cursor: z.string().max(1_000).optional(),
});

export type ListTasksQuery = z.infer<typeof listTasksQuery>;

/** The one mapping from a stored task to its API shape; internal fields (revision, outbox, overdue) never leave. */
export function toTaskResponse(doc: TaskDoc): TaskResponse {
  return {
    task_id: doc._id,
    title: doc.title,
    due_at: toIso(doc.due_at),
    assigned_to: doc.assigned_to,
    description: doc.description,
    priority: doc.priority,
    task_type: doc.task_type,
    item_id: doc.item_id,
    duration_minutes: doc.duration_minutes,
    reminder_minutes: doc.reminder_minutes,
    notes: doc.notes,
    is_completed: doc.is_completed,
    created_by: doc.created_by,
    completed_at: toIso(doc.completed_at),
    created_at: toIso(doc.created_at),
    updated_at: toIso(doc.updated_at),
  };
}

/** A task as stored in `tasks` (the tasks repository is the only code that reads or writes it). */
export interface TaskDoc extends OutboxFields<EventEnvelope> {
  _id: string;
  company_id: string;
  title: string;
  due_at: Date;
  assigned_to: string;
  description: string | null;
  priority: TaskPriority;
  task_type: TaskType;
  item_id: string | null;
  duration_minutes: number | null;
  reminder_minutes: number | null;
  notes: string | null;
  is_completed: boolean;
  created_by: string;
  completed_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** Internal compare-and-set counter: every write is conditional on the revision it read. Not in the API. */
  revision: number;
  /** The due_at for which task.overdue already fired (null: not yet). Owned by the overdue scanner. */
  overdue_fired_for: Date | null;
  /** Every due time task.overdue fired for (the latest few): moving due_at back to one does not re-arm. */
  overdue_fired_dues?: Date[];
  /** Set by DELETE: the task is archived, not erased, and every read below leaves it out (null or absent: live). */
  archived_at?: Date | null;
}
