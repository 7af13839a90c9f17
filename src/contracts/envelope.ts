import { z } from 'zod';
import { newId } from '../shared/ids.js';
import { currentTraceContext, type EventTraceContext } from '../telemetry/events.js';

export const EVENT_TYPES = [
  'task.created',
  'task.updated',
  'task.completed',
  'task.overdue',
  'task.deleted',
  'item.created',
  'item.updated',
  'item.deleted',
  'hook.disabled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
/** The task events automations can be triggered by: the source spec's four (section 9); task.deleted is not one. */
export const TASK_EVENT_TYPES = ['task.created', 'task.updated', 'task.completed', 'task.overdue'] as const;
export type TaskEventType = (typeof TASK_EVENT_TYPES)[number];

/**
 * A hook disabled after its deliveries failed for 5 days (DECISIONS.md section 13.2): a company event (in the
 * feed for keys with hooks:manage, delivered to the company's other hooks subscribed to it), `data` the hook.
 */
export const HOOK_DISABLED = 'hook.disabled';

/**
 * The test event of `POST /v1/ext/hooks/{hook_id}/test`: sent to that one hook through the normal
 * signed delivery, never recorded as a company event (not in the events feed, no automation sees it).
 */
export const HOOK_PING = 'hook.ping';
/** Every type a webhook delivery can carry. */
export const WEBHOOK_EVENT_TYPES = [...EVENT_TYPES, HOOK_PING] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** What an event is about: a task, an item, or a hook. */
export type EventResource = 'task' | 'item' | 'hook';

/** Each event type's resource: the one table every consumer reads it from (a new type must be added here). */
const EVENT_RESOURCES = {
  'task.created': 'task',
  'task.updated': 'task',
  'task.completed': 'task',
  'task.overdue': 'task',
  'task.deleted': 'task',
  'item.created': 'item',
  'item.updated': 'item',
  'item.deleted': 'item',
  'hook.disabled': 'hook',
  'hook.ping': 'hook',
} as const satisfies Record<WebhookEventType, EventResource>;

export type ResourceOf<T extends WebhookEventType> = (typeof EVENT_RESOURCES)[T];

export function resourceOf<T extends WebhookEventType>(type: T): ResourceOf<T> {
  return EVENT_RESOURCES[type];
}

export type Changes = Record<string, { from: unknown; to: unknown }>;

/**
 * What caused an event (DECISIONS.md section 13.1): an API key of the external API, an automation's
 * action, the admin API, or time (`task.overdue`). Lets a two-way sync leave out its own echo.
 */
export type EventActor =
  { type: 'api_key'; id: string } | { type: 'automation'; id: string } | { type: 'admin' } | { type: 'system' };

export const SYSTEM_ACTOR: EventActor = { type: 'system' };
export const ADMIN_ACTOR: EventActor = { type: 'admin' };

export const eventActorSchema = z
  .object({
    type: z.enum(['api_key', 'automation', 'admin', 'system']),
    id: z.string().optional().describe('The key_id (api_key) or automation_id (automation)'),
  })
  .meta({
    id: 'EventActor',
    description: 'What caused the event: an API key, an automation, the admin API, or time (task.overdue)',
    example: { type: 'api_key', id: 'key_6740b7a1c2d3e4f5a6b7c8d3' },
  });

/**
 * The envelope every consumer (automations, hooks) receives (DECISIONS.md section 9). `depth` and the
 * trace context (`traceparent`, `tracestate`: where the event was recorded, when tracing) are internal:
 * publicEnvelope drops them from what receivers and the feed get.
 */
export interface EventEnvelope extends EventTraceContext {
  event_id: string;
  type: EventType;
  company_id: string;
  occurred_at: string;
  /**
   * The company's position of the event in the feed (DECISIONS.md section 13.1), assigned by the
   * sequencer when the event becomes readable; absent until then (never on what consumers receive).
   */
  sequence?: number;
  actor: EventActor;
  data: Record<string, unknown>;
  changes?: Changes;
  /** How many automations led to this event; automations stop at MAX_AUTOMATION_DEPTH. */
  depth?: number;
  /** The record was erased (docs/erasure.md): `data` is empty and `changes` gone. */
  erased?: true;
}

/** The OpenAPI component naming one event type's webhook payload: `task.updated` → `TaskUpdatedEvent`. */
export function webhookSchemaId(type: WebhookEventType): string {
  return `${type
    .split('.')
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join('')}Event`;
}

/** What a webhook carries: a company event, or a hook's test ping (same envelope). */
export type WebhookEnvelope = Omit<EventEnvelope, 'type'> & { type: WebhookEventType };

/** A company's feed position: what `sequence` holds and `after=` takes. */
export const MAX_SEQUENCE = 2 ** 31 - 1;
export const sequenceSchema = z
  .number()
  .int()
  .min(1)
  .max(MAX_SEQUENCE)
  .describe(
    "The event's position in its company's feed, strictly increasing in the order events become readable (gaps allowed)",
  )
  .meta({ example: 1042 });

/**
 * What an envelope carries instead of a value over the cap (DECISIONS.md section 13.4, docs/events.md):
 * the value's size as JSON (UTF-8 bytes). The record itself, read by its id, has the value. No field an
 * envelope can carry is an object otherwise, so the marker cannot be mistaken for a value.
 */
export interface TruncatedValue {
  truncated: true;
  bytes: number;
}

export const truncatedValueSchema = z
  .strictObject({
    truncated: z.literal(true),
    bytes: z
      .number()
      .int()
      .min(0)
      .max(16 * 1024 * 1024)
      .describe('Size of the value left out, as JSON in UTF-8')
      .meta({ example: 10002 }),
  })
  .meta({
    id: 'TruncatedValue',
    description:
      'Stands in an event for a value over the cap (4 KiB as JSON, or less when the envelope would pass 256 KiB); read the record by its id for the value',
    example: { truncated: true, bytes: 10002 },
  });

/** A value of `data` or a `from`/`to` of `changes` is replaced when its JSON is larger than this. */
export const ENVELOPE_VALUE_MAX_BYTES = 4 * 1024;
/** What an envelope weighs at most, as JSON: beyond it, further values are replaced, largest first. */
export const ENVELOPE_MAX_BYTES = 256 * 1024;

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? 'null');

/** One value an envelope may replace: where it is and what it weighs as JSON. */
interface Slot {
  holder: Record<string, unknown>;
  key: string;
  bytes: number;
}

/**
 * Bounds what one envelope carries (DECISIONS.md section 13.4): every cappable value of `data`, and
 * every `from`/`to` of a cappable field in `changes`, whose JSON is over ENVELOPE_VALUE_MAX_BYTES
 * becomes a TruncatedValue; should the envelope still weigh more than ENVELOPE_MAX_BYTES (many values
 * just under the cap), the largest remaining values follow until it does not. Identifiers and core
 * fields are never cappable, so the record can always be read by id. Copies what it changes: `data`
 * is often the API answer of the same request.
 */
export function capEnvelope(
  data: Record<string, unknown>,
  changes: Changes | undefined,
  cappable: (field: string) => boolean,
): { data: Record<string, unknown>; changes?: Changes } {
  const cappedData = { ...data };
  const cappedChanges: Changes | undefined = changes ? {} : undefined;
  const slots: Slot[] = [];
  for (const [key, value] of Object.entries(data))
    if (cappable(key)) slots.push({ holder: cappedData, key, bytes: jsonBytes(value) });
  for (const [field, change] of Object.entries(changes ?? {})) {
    const copy = { ...change };
    cappedChanges![field] = copy;
    if (!cappable(field)) continue;
    slots.push({ holder: copy, key: 'from', bytes: jsonBytes(change.from) });
    slots.push({ holder: copy, key: 'to', bytes: jsonBytes(change.to) });
  }
  const replace = (slot: Slot): number => {
    const marker: TruncatedValue = { truncated: true, bytes: slot.bytes };
    slot.holder[slot.key] = marker;
    return slot.bytes - Buffer.byteLength(JSON.stringify(marker));
  };
  const kept = slots.filter((slot) => slot.bytes <= ENVELOPE_VALUE_MAX_BYTES);
  const keptBytes = kept.reduce((sum, slot) => sum + slot.bytes, 0);
  // Kept values of at most half the maximum leave the other half for what is never replaced (core
  // fields, field names: under 64 KiB with 100 custom fields of 64-character names), so no count is needed.
  if (kept.length === slots.length && keptBytes <= ENVELOPE_MAX_BYTES / 2)
    return { data, ...(changes ? { changes } : {}) };
  for (const slot of slots) if (slot.bytes > ENVELOPE_VALUE_MAX_BYTES) replace(slot);
  if (keptBytes > ENVELOPE_MAX_BYTES / 2) {
    // 1 KiB for the envelope's own fields (event_id, type, company_id, occurred_at).
    let total = jsonBytes({ data: cappedData, changes: cappedChanges }) + 1024;
    kept.sort((a, b) => b.bytes - a.bytes);
    for (const slot of kept) {
      if (total <= ENVELOPE_MAX_BYTES) break;
      total -= replace(slot);
    }
  }
  return { data: cappedData, ...(cappedChanges ? { changes: cappedChanges } : {}) };
}

export const eventEnvelopeSchema = z
  .object({
    event_id: z.string(),
    type: z.enum(EVENT_TYPES),
    company_id: z.string(),
    occurred_at: z.string(),
    sequence: sequenceSchema,
    actor: eventActorSchema,
    data: z.record(z.string(), z.unknown()),
    changes: z.record(z.string(), z.object({ from: z.unknown(), to: z.unknown() })).optional(),
    erased: z
      .literal(true)
      .optional()
      .describe(
        'Present when the record was erased (a data-protection request): `data` is then empty, `changes` absent',
      ),
  })
  .meta({ id: 'Event' });

export interface EventOptions {
  actor: EventActor;
  changes?: Changes;
  depth?: number;
  occurredAt?: Date;
}

export interface BuildEventOptions extends Partial<EventOptions> {
  /** The fields of `data` (and keys of `changes`) whose values may be replaced by a TruncatedValue (capEnvelope). */
  cappable?: (field: string) => boolean;
}

/** The low-level builder (product code builds company events with buildCompanyEvent, which needs the actor). */
export function buildEvent(
  type: EventType,
  companyId: string,
  data: Record<string, unknown>,
  options: BuildEventOptions = {},
): EventEnvelope {
  const capped = options.cappable
    ? capEnvelope(data, options.changes, options.cappable)
    : { data, changes: options.changes };
  return {
    event_id: newId('event'),
    type,
    company_id: companyId,
    occurred_at: (options.occurredAt ?? new Date()).toISOString(),
    actor: options.actor ?? SYSTEM_ACTOR,
    data: capped.data,
    ...(capped.changes ? { changes: capped.changes } : {}),
    ...(options.depth ? { depth: options.depth } : {}),
    ...currentTraceContext(),
  };
}

/** The envelope as receivers and the feed get it: without the internal `depth` and trace context. */
export type PublicEnvelope = Omit<EventEnvelope, 'depth' | 'traceparent' | 'tracestate'>;

export function publicEnvelope(event: EventEnvelope): PublicEnvelope {
  const { depth: _depth, traceparent: _traceparent, tracestate: _tracestate, ...envelope } = event;
  return envelope;
}

/** Field-by-field differences between two API shapes, for `changes` (only fields that differ). */
export function diffResources(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  ignore: string[] = [],
): Changes {
  const changes: Changes = {};
  for (const field of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (ignore.includes(field)) continue;
    const from = before[field] ?? null;
    const to = after[field] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[field] = { from, to };
  }
  return changes;
}

/** Which event of which company: what a consumer records its progress against. */
export type EventRef = Pick<EventEnvelope, 'event_id' | 'company_id'>;
