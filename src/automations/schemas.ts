import { z } from 'zod';
import { TASK_EVENT_TYPES } from '../contracts/envelope.js';
import { limitSchema } from '../shared/pagination.js';
import { isoTimestampOutput } from '../shared/time.js';

const PRIORITIES = ['none', 'low', 'medium', 'high', 'urgent'] as const;
const TASK_TYPES = ['to_do', 'call', 'email', 'meeting', 'follow_up'] as const;

const webhookAction = z.strictObject({
  type: z.literal('webhook'),
  url: z.url({ protocol: /^https?$/ }).max(2_000),
});

const createTaskAction = z.strictObject({
  type: z.literal('create_task'),
  title: z.string().trim().min(1).max(500),
  due_in_minutes: z
    .number()
    .int()
    .min(0)
    .max(525_600)
    .describe('The task is due this many minutes after the event')
    .meta({ example: 60 }),
  task_type: z.enum(TASK_TYPES).optional(),
  priority: z.enum(PRIORITIES).optional(),
  assigned_to: z.string().min(1).optional(),
});

const updateItemAction = z
  .strictObject({
    type: z.literal('update_item'),
    stage_id: z.string().min(1).optional(),
    status_id: z.string().min(1).optional(),
  })
  .refine((action) => action.stage_id !== undefined || action.status_id !== undefined, 'needs stage_id or status_id');

export const automationActionSchema = z.discriminatedUnion('type', [webhookAction, createTaskAction, updateItemAction]);
export type AutomationAction = z.infer<typeof automationActionSchema>;

export const automationConditionsSchema = z.strictObject({
  task_type: z.enum(TASK_TYPES).optional(),
  priority: z.enum(PRIORITIES).optional(),
  assigned_to: z.string().min(1).optional(),
});
export type AutomationConditions = z.infer<typeof automationConditionsSchema>;

export const createAutomationBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  enabled: z.boolean().default(true),
  trigger: z.enum(TASK_EVENT_TYPES),
  conditions: automationConditionsSchema.optional(),
  actions: z.array(automationActionSchema).min(1).max(10),
});

export const updateAutomationBody = z.strictObject({
  name: z.string().trim().min(1).max(200).optional(),
  enabled: z.boolean().optional(),
  trigger: z.enum(TASK_EVENT_TYPES).optional(),
  conditions: automationConditionsSchema.nullable().optional(),
  actions: z.array(automationActionSchema).min(1).max(10).optional(),
});

export const automationSchema = z
  .object({
    automation_id: z.string(),
    name: z.string(),
    enabled: z.boolean(),
    trigger: z.enum(TASK_EVENT_TYPES),
    conditions: automationConditionsSchema.nullable(),
    actions: z.array(
      z.object({
        type: z.enum(['webhook', 'create_task', 'update_item']),
        url: z.string().optional(),
        title: z.string().optional(),
        due_in_minutes: z.number().optional(),
        task_type: z.string().optional(),
        priority: z.string().optional(),
        assigned_to: z.string().optional(),
        stage_id: z.string().optional(),
        status_id: z.string().optional(),
      }),
    ),
    created_at: isoTimestampOutput,
    updated_at: isoTimestampOutput,
  })
  .meta({ id: 'Automation' });

/** An event caused by an automation carries its depth; at this depth no further automation runs. */
export const MAX_AUTOMATION_DEPTH = 3;

export const automationRunSchema = z
  .object({
    run_id: z.string(),
    automation_id: z.string(),
    event_id: z.string(),
    event_type: z.string(),
    status: z.enum(['running', 'succeeded', 'failed']),
    error: z.string().nullable(),
    depth: z
      .number()
      .int()
      .min(0)
      .max(MAX_AUTOMATION_DEPTH - 1)
      .describe('How many automations led to the event (a run starts only below the maximum depth)')
      .meta({ example: 0 }),
    started_at: isoTimestampOutput,
    finished_at: isoTimestampOutput.nullable(),
  })
  .meta({ id: 'AutomationRun' });

export const listRunsQuery = z.strictObject({
  automation_id: z.string().optional(),
  limit: limitSchema,
});
