import fastJson from 'fast-json-stringify';
import { z } from 'zod';
import { resourceOf } from '../contracts/envelope.js';
import {
  eventActorSchema,
  HOOK_PING,
  sequenceSchema,
  truncatedValueSchema,
  WEBHOOK_EVENT_TYPES,
  webhookSchemaId,
  type WebhookEnvelope,
  type WebhookEventType,
} from '../contracts/envelope.js';
import { itemSchema } from '../contracts/items.js';
import { TASK_COMPLETED_EXAMPLE, TASK_EXAMPLE, taskSchema } from '../contracts/tasks.js';
import { responseJsonSchema } from '../http/serializer.js';
import { hookSchema } from './schemas.js';

/**
 * One schema per event type a webhook can carry (DECISIONS.md section 12.2): the envelope of section
 * 9 with `type` fixed and `data` typed (a task, an item, or the ping's `{ hook_id }`). They are the
 * OpenAPI document's `webhooks` and they write every body sent (`webhookBody`), so the document and
 * the wire cannot disagree.
 */
const changesSchema = z
  .record(z.string(), z.object({ from: z.unknown(), to: z.unknown() }))
  .describe(
    'The fields that changed (item.updated, task.updated, task.completed after an update): before and after. A `from` or `to` over the cap is a TruncatedValue, as in `data`',
  );

/**
 * The resources as events carry them (DECISIONS.md section 13.4): an item's custom field, a task's
 * description or notes may be a TruncatedValue instead (src/contracts/envelope.ts, capEnvelope).
 */
const CAPPED =
  ' Values over the cap (custom fields of items; description and notes of tasks) are TruncatedValue markers: read the record by its id for them.';
const eventItemSchema = itemSchema
  .catchall(z.union([z.string(), z.number(), z.boolean(), z.array(z.string()), truncatedValueSchema, z.null()]))
  .meta({ id: 'EventItem', description: `The item as the API shows it.${CAPPED}` });
const longText = z.union([z.string(), truncatedValueSchema, z.null()]);
const eventTaskSchema = taskSchema
  .extend({ description: longText, notes: longText.describe('null when empty') })
  .meta({ id: 'EventTask', description: `The task as the API shows it.${CAPPED}` });

const pingDataSchema = z.object({ hook_id: z.string().describe('The hook the ping was sent to') });

type DataKind = 'task' | 'item' | 'hook' | 'ping';
const kindOf = (type: WebhookEventType): DataKind => {
  if (type === HOOK_PING) return 'ping';
  return resourceOf(type);
};
const DATA_SCHEMAS = { task: eventTaskSchema, item: eventItemSchema, hook: hookSchema, ping: pingDataSchema } as const;
const DATA_DESCRIPTIONS: Record<DataKind, string> = {
  task: 'The task as the API shows it, after the change (as it was, for task.deleted)',
  item: 'The item as the API shows it, after the change (as it was, for item.deleted)',
  hook: 'The hook as GET /v1/ext/hooks shows it (never its secret), disabled: enabled false, disabled_reason failing',
  ping: 'Which hook was tested',
};

// Examples: the entity examples of the API reference, each under its own event type.
const itemExample = (itemSchema.meta()?.example ?? {}) as Record<string, unknown>;
const EXAMPLE_DATA: Record<WebhookEventType, { data: Record<string, unknown>; changes?: Record<string, unknown> }> = {
  'task.created': { data: TASK_EXAMPLE },
  'task.updated': {
    data: { ...TASK_EXAMPLE, priority: 'urgent', updated_at: '2026-11-20T08:15:00.000Z' },
    changes: { priority: { from: 'high', to: 'urgent' } },
  },
  'task.completed': TASK_COMPLETED_EXAMPLE,
  'task.overdue': { data: TASK_EXAMPLE },
  'task.deleted': { data: TASK_EXAMPLE },
  'item.created': { data: itemExample },
  'item.updated': {
    data: { ...itemExample, stage: 'stg_6740b7a1c2d3e4f5a6b7c8d2', version: 2 },
    changes: { stage: { from: 'stg_6740b7a1c2d3e4f5a6b7c8d1', to: 'stg_6740b7a1c2d3e4f5a6b7c8d2' } },
  },
  'item.deleted': { data: itemExample },
  'hook.disabled': {
    data: {
      ...(hookSchema.meta()?.example as Record<string, unknown>),
      enabled: false,
      disabled_reason: 'failing',
      disabled_at: '2026-11-25T08:30:00.000Z',
    },
  },
  'hook.ping': { data: { hook_id: 'hk_6740b7a1c2d3e4f5a6b7c8d9' } },
};

function payloadSchema(type: WebhookEventType) {
  const kind = kindOf(type);
  const example = EXAMPLE_DATA[type];
  return z
    .object({
      event_id: z.string().describe('Unique per event, the same on every retry (and the webhook-id header)'),
      type: z.literal(type),
      company_id: z.string(),
      occurred_at: z.string().describe('ISO 8601, UTC'),
      ...(kind === 'ping'
        ? {}
        : {
            sequence: sequenceSchema.describe(
              "The event's position in the company's events feed: read on from it with GET /v1/ext/events?after=",
            ),
          }),
      actor: eventActorSchema,
      data: DATA_SCHEMAS[kind].describe(DATA_DESCRIPTIONS[kind]),
      changes: changesSchema.optional(),
    })
    .meta({
      id: webhookSchemaId(type),
      description: `The body of a ${type} delivery`,
      example: {
        event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9',
        type,
        company_id: 'cmp_6740b7a1c2d3e4f5a6b7c8d0',
        occurred_at: '2026-11-20T08:30:00.000Z',
        ...(kind === 'ping' ? {} : { sequence: 1042 }),
        actor: { type: 'api_key', id: 'key_6740b7a1c2d3e4f5a6b7c8d3' },
        ...example,
      },
    });
}

const payloadSchemas = new Map<WebhookEventType, z.ZodType>(
  WEBHOOK_EVENT_TYPES.map((type) => [type, payloadSchema(type)]),
);

/** The payload schema of one event type. */
export function webhookPayloadSchema(type: WebhookEventType): z.ZodType {
  const schema = payloadSchemas.get(type);
  if (!schema) throw new Error(`no payload schema for ${type}`);
  return schema;
}

/**
 * Each type's body writer, compiled from its schema once: it writes the declared fields only (the
 * envelope's internal `depth` never leaves). `required` is dropped so that an event recorded before a
 * field existed still goes out, without it, rather than failing every attempt.
 */
const writers = new Map<WebhookEventType, (payload: unknown) => string>();

function withoutRequired(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutRequired);
  if (!node || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).flatMap(([key, value]) => (key === 'required' ? [] : [[key, withoutRequired(value)]])),
  );
}

/** The body of a delivery, written by its type's payload schema. */
export function writeWebhookPayload(event: WebhookEnvelope): string {
  let write = writers.get(event.type);
  if (!write) {
    const schema = withoutRequired(responseJsonSchema(webhookPayloadSchema(event.type)));
    write = fastJson(schema as never) as (payload: unknown) => string;
    writers.set(event.type, write);
  }
  return write(event);
}
