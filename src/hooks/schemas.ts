import { z } from 'zod';
import { EVENT_TYPES, WEBHOOK_EVENT_TYPES } from '../contracts/envelope.js';
import { isoTimestampInput, isoTimestampOutput, toIso } from '../shared/time.js';
import { conditionsToOutput, MAX_CHANGE_FIELDS, type ChangeCondition } from './change-filter.js';
import { DELIVERY_STATUSES, type ListedAttempt } from './deliveries.repository.js';
import {
  disabledState,
  eventsOf,
  HOOK_DISABLED_REASONS,
  type HookDoc,
  type HookEvent,
  type HookFilter,
} from './repository.js';
import { DELIVERY_ERRORS, KEPT_RESPONSE_BYTES, type DeliveryError } from './sender.js';

export const HOOK_EVENTS = [...EVENT_TYPES, '*'] as const;

const example = {
  hook_id: 'hk_6740b7a1c2d3e4f5a6b7c8d9',
  target_url: 'https://hooks.example.com/pipeline-records',
  event: 'task.created',
  events: ['task.created', 'task.completed'],
  filter: { pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d2' },
  created_at: '2026-11-20T08:00:00.000Z',
  enabled: true,
  disabled_reason: null,
  disabled_at: null,
};

/** At most this many event types per hook (DECISIONS.md section 12.2). */
export const MAX_HOOK_EVENTS = 10;

const hookEvent = z.enum(HOOK_EVENTS);
/** At most this many keys a hook leaves out the events of. */
export const MAX_EXCLUDED_ACTORS = 25;

const hookFilter = z
  .strictObject({
    pipeline_id: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe('Only item events of this pipeline, and task events whose item is in it'),
    exclude_actors: z
      .array(z.string().min(1).max(100))
      .min(1)
      .max(MAX_EXCLUDED_ACTORS)
      .optional()
      .describe("Leave out events these API keys (key_ids of the company) caused: a two-way sync's own echo"),
    changes: z
      .record(
        z.string().min(1).max(100),
        z.strictObject({
          from: z.unknown().optional().describe('The value before the change'),
          to: z.unknown().optional().describe('The value after the change'),
        }),
      )
      .refine((changes) => Object.keys(changes).length >= 1, 'name at least one field')
      .refine((changes) => Object.keys(changes).length <= MAX_CHANGE_FIELDS, `at most ${MAX_CHANGE_FIELDS} fields`)
      .optional()
      .describe(
        'Only *.updated events whose `changes` has one of these fields (with these `from`/`to` values when given); ' +
          'other event types pass. Field names as `changes` reports them: task fields for task.updated, item fields ' +
          '(`stage`, `status`, `name`, ...) and custom fields by name for item.updated. Example: { "stage": { "to": "<stage_id>" } }',
      ),
  })
  .superRefine((filter, ctx) => {
    if (filter.pipeline_id === undefined && filter.exclude_actors === undefined && filter.changes === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['pipeline_id'],
        message: 'give at least one of pipeline_id, exclude_actors, changes',
      });
  })
  .describe('Which events of the subscribed types are delivered');

/** One entity schema; the creation response adds the secret. */
export const hookSchema = z
  .object({
    hook_id: z.string(),
    target_url: z.string(),
    event: hookEvent.describe('The first of `events` (the single event type of the original subscribe call)'),
    events: z
      .array(hookEvent)
      .min(1)
      .max(MAX_HOOK_EVENTS)
      .describe('The event types delivered, or ["*"] for every type'),
    filter: hookFilter.nullable().describe('Which events of those types are delivered; null for all of them'),
    created_at: isoTimestampOutput,
    enabled: z.boolean().describe('Whether events are delivered to the hook'),
    disabled_reason: z
      .enum(HOOK_DISABLED_REASONS)
      .nullable()
      .describe(
        'Why the hook is disabled, null while enabled: `failing` (every delivery failed for 5 days; PATCH ' +
          'enabled true, subscribing again, a test or a redelivery re-enables it), `manual` (PATCH enabled false) ' +
          'or `key_revoked` (the API key that created it was revoked or expired; it stays disabled: delete it and ' +
          'subscribe again with a valid key)',
      ),
    disabled_at: isoTimestampOutput
      .nullable()
      .describe("When the hook was disabled (for `key_revoked` by expiry: the key's expires_at); null while enabled"),
  })
  .meta({ id: 'Hook', example });

// Same fields as the entity, in the documented order, with the secret after `filter`.
const { hook_id, target_url, event, events, filter, created_at, enabled, disabled_reason, disabled_at } =
  hookSchema.shape;
const secret = z.string().describe('Standard Webhooks signing secret (`whsec_...`)');
export const createdHookSchema = z
  .object({
    hook_id,
    target_url,
    event,
    events,
    filter,
    secret: secret.describe('Standard Webhooks signing secret (`whsec_...`); shown only here and on rotation'),
    created_at,
    enabled,
    disabled_reason,
    disabled_at,
  })
  .meta({ id: 'HookWithSecret', example: { ...example, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' } });

const targetUrl = z
  .url({ protocol: /^https?$/ })
  .max(2_000)
  .describe('http(s) URL that receives signed POSTs; private, loopback and metadata addresses are refused');
const eventList = z
  .array(hookEvent)
  .min(1)
  .max(MAX_HOOK_EVENTS)
  .superRefine((types, ctx) => {
    if (types.includes('*') && types.length > 1)
      ctx.addIssue({ code: 'custom', message: '"*" stands alone: every type, or a list of types without it' });
    if (new Set(types).size < types.length) ctx.addIssue({ code: 'custom', message: 'lists a type twice' });
  });

export const createHookBody = z
  .strictObject({
    target_url: targetUrl,
    event: hookEvent.optional().describe('One event type, or * for every type (give this or `events`)'),
    events: eventList.optional().describe(`1 to ${MAX_HOOK_EVENTS} event types, or ["*"] (give this or \`event\`)`),
    filter: hookFilter.optional(),
  })
  .superRefine((body, ctx) => {
    if (body.event !== undefined && body.events !== undefined)
      ctx.addIssue({ code: 'custom', path: ['events'], message: 'give event or events, not both' });
    if (body.event === undefined && body.events === undefined)
      ctx.addIssue({ code: 'custom', path: ['events'], message: 'event or events is required' });
  })
  .meta({
    example: {
      target_url: 'https://hooks.example.com/pipeline-records',
      events: ['task.created', 'task.completed'],
      filter: {
        pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d2',
        changes: { stage: { to: 'stg_6740b7a1c2d3e4f5a6b7c8d4' } },
      },
    },
  });

export type CreateHookBody = z.infer<typeof createHookBody>;

/** PATCH /v1/ext/hooks/{hook_id} (DECISIONS.md 13.2): what is given changes; the secret and history stay. */
export const updateHookBody = z
  .strictObject({
    target_url: targetUrl.optional(),
    events: eventList.optional().describe(`1 to ${MAX_HOOK_EVENTS} event types, or ["*"]`),
    filter: hookFilter.nullable().optional().describe('The new filter; null removes it'),
    enabled: z
      .boolean()
      .optional()
      .describe(
        'false disables the hook (disabled_reason manual); true re-enables it and clears its failure state, so the 5-day rule starts again',
      ),
  })
  .superRefine((body, ctx) => {
    if (Object.keys(body).length === 0)
      ctx.addIssue({
        code: 'custom',
        path: ['target_url'],
        message: 'give at least one of target_url, events, filter, enabled',
      });
  })
  .meta({ example: { target_url: 'https://hooks.example.com/v2/pipeline-records', enabled: true } });

export type UpdateHookBody = z.infer<typeof updateHookBody>;

const statusCode = z.number().int().min(100).max(999).describe('An HTTP status code').nullable();
/** The subscribed types of a valid body (one of `event` and `events` is there). */
export function requestedEvents(body: CreateHookBody): [HookEvent, ...HookEvent[]] {
  const [first = body.event!, ...rest] = body.events ?? [];
  return [first, ...rest];
}

export const rotatedSecretSchema = z
  .object({
    hook_id,
    secret: secret.describe('The new signing secret (`whsec_...`); shown only in this response'),
    previous_secret_expires_at: isoTimestampOutput.describe(
      'Until then deliveries carry a signature with each secret (space-separated in webhook-signature)',
    ),
  })
  .meta({
    id: 'HookSecretRotation',
    example: {
      hook_id: example.hook_id,
      secret: 'whsec_Qh1Uf2e6Xr3KJmZC0b9vWl5nTqYpD7sA',
      previous_secret_expires_at: '2026-11-21T08:00:00.000Z',
    },
  });

export const hookPingSchema = z
  .object({
    hook_id,
    event_id: z.string().describe('The hook.ping event sent: its webhook-id, and its entry in the deliveries list'),
    status: z.literal('queued'),
  })
  .meta({
    id: 'HookPing',
    example: { hook_id: example.hook_id, event_id: 'evt_6740b7a1c2d3e4f5a6b7c8e0', status: 'queued' },
  });

export const deliveryAttemptSchema = z
  .object({
    event_id: z.string().describe('Also the webhook-id header of the delivery'),
    type: z.enum(WEBHOOK_EVENT_TYPES).describe("The event's type, as `type` in the envelope"),
    event_type: z
      .enum(WEBHOOK_EVENT_TYPES)
      .describe('Deprecated (sunset 2027-06-30): the same as `type`')
      .meta({ deprecated: true }),
    attempt: z
      .number()
      .int()
      .min(1)
      .max(50)
      .describe('1 for the first try; redeliveries count from 1 again')
      .meta({ example: 1 }),
    succeeded: z.boolean(),
    response_status: statusCode
      .describe("The receiver's HTTP status, null when no answer arrived")
      .meta({ example: 200 }),
    response_body: z
      .string()
      .max(KEPT_RESPONSE_BYTES)
      .nullable()
      .describe("At most the first 1 KiB of the receiver's answer, as text; null when no answer arrived"),
    error: z
      .enum(DELIVERY_ERRORS)
      .nullable()
      .describe(
        'Why the attempt failed, null when it succeeded: no answer in time (`timeout`), the connection refused, ' +
          'reset or its TLS handshake failed, the name did not resolve (`dns_failure`), the target resolved to an ' +
          'address deliveries may not reach (`refused_target`), or an answer other than 2xx (`http_status`; ' +
          'redirects are not followed)',
      ),
    duration_ms: z
      .number()
      .int()
      .min(0)
      .max(86_400_000)
      .describe('From sending the request to the end of the answer (or the failure)')
      .meta({ example: 84 }),
    next_attempt_at: isoTimestampOutput.nullable().describe('When the next attempt is due; null when none will follow'),
    attempted_at: isoTimestampOutput,
    status_code: statusCode
      .describe('Deprecated (sunset 2027-06-30): the same as `response_status`')
      .meta({ deprecated: true, example: 200 }),
    next_retry_at: isoTimestampOutput
      .nullable()
      .describe('Deprecated (sunset 2027-06-30): the same as `next_attempt_at`')
      .meta({ deprecated: true }),
  })
  .meta({
    id: 'HookDeliveryAttempt',
    example: {
      event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9',
      type: 'task.created',
      event_type: 'task.created',
      attempt: 2,
      succeeded: false,
      response_status: 503,
      response_body: '{"error":"maintenance, back in a minute"}',
      error: 'http_status',
      duration_ms: 41,
      next_attempt_at: '2026-11-20T08:35:30.000Z',
      attempted_at: '2026-11-20T08:05:30.000Z',
      status_code: 503,
      next_retry_at: '2026-11-20T08:35:30.000Z',
    },
  });

/** GET /v1/ext/hooks/{hook_id}/deliveries (DECISIONS.md 13.2). */
export const deliveriesQuery = z
  .strictObject({
    status: z
      .enum(DELIVERY_STATUSES)
      .optional()
      .describe(
        'Only deliveries (one per event) whose latest attempt succeeded, failed with none to follow (the retries ran out, or the hook was disabled), or that wait for an attempt (`pending`)',
      ),
    since: isoTimestampInput.optional().describe('Only deliveries whose latest attempt was at or after this time'),
    until: isoTimestampInput.optional().describe('Only deliveries whose latest attempt was before this time'),
  })
  .superRefine((query, ctx) => {
    // Runs also when a timestamp failed its own check (zod's checks do not abort): judged only when both are dates.
    if (query.since instanceof Date && query.until instanceof Date && query.since.getTime() > query.until.getTime())
      ctx.addIssue({ code: 'custom', path: ['since'], message: 'is after until' });
  });

export type DeliveriesQueryInput = z.infer<typeof deliveriesQuery>;

/** POST /v1/ext/hooks/{hook_id}/recover (DECISIONS.md 13.2). */
export const recoverBody = z
  .strictObject({
    since: isoTimestampInput.describe('Send again the events that occurred from this time on (within retention)'),
    until: isoTimestampInput.optional().describe('... and before this time; now when absent'),
  })
  .superRefine((body, ctx) => {
    // Runs also when a timestamp failed its own check (zod's checks do not abort): judged only when both are dates.
    if (body.since instanceof Date && body.until instanceof Date && body.since.getTime() >= body.until.getTime())
      ctx.addIssue({ code: 'custom', path: ['since'], message: 'is not before until' });
  })
  .meta({ example: { since: '2026-12-01T00:00:00Z', until: '2026-12-03T12:00:00Z' } });

export type RecoverBody = z.infer<typeof recoverBody>;

export const recoverySchema = z
  .object({
    hook_id: z.string(),
    since: isoTimestampOutput,
    until: isoTimestampOutput,
    queued: z
      .number()
      .int()
      .min(0)
      .max(2_147_483_647)
      .describe(
        'Events the hook takes in the period whose delivery has not succeeded: each is sent again, in sequence order',
      )
      .meta({ example: 1284 }),
  })
  .meta({
    id: 'HookRecovery',
    example: {
      hook_id: 'hk_6740b7a1c2d3e4f5a6b7c8d9',
      since: '2026-12-01T00:00:00.000Z',
      until: '2026-12-03T12:00:00.000Z',
      queued: 1284,
    },
  });

export type RecoveryResponse = z.infer<typeof recoverySchema>;

export const redeliverySchema = z
  .object({ hook_id: z.string(), event_id: z.string(), status: z.literal('queued') })
  .meta({
    id: 'HookRedelivery',
    example: { hook_id: 'hk_6740b7a1c2d3e4f5a6b7c8d9', event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9', status: 'queued' },
  });

export type HookResponse = z.infer<typeof hookSchema>;
export type CreatedHookResponse = z.infer<typeof createdHookSchema>;
export type DeliveryAttemptResponse = z.infer<typeof deliveryAttemptSchema>;
export type RotatedSecretResponse = z.infer<typeof rotatedSecretSchema>;
export type HookPingResponse = z.infer<typeof hookPingSchema>;

/** The admin API's view of a hook: the subscriber's, with the key that created it. */
export const adminHookSchema = hookSchema
  .extend({
    created_by_key_id: z
      .string()
      .nullable()
      .describe(
        'The API key that subscribed the hook (revoking it disables the hook); null for hooks older than that record',
      ),
  })
  .meta({
    id: 'AdminHook',
    example: { ...example, created_by_key_id: 'key_6740b7a1c2d3e4f5a6b7c8d1' },
  });

export type AdminHookResponse = z.infer<typeof adminHookSchema>;

/**
 * The one mapping from a stored hook to its API shape; the secret and failure bookkeeping never leave. A hook
 * whose creating key has expired shows as disabled (`key_revoked`) from the key's expiry on.
 */
export function toHookResponse(doc: HookDoc, now = new Date()): HookResponse {
  const events = eventsOf(doc);
  const disabled = disabledState(doc, now);
  return {
    hook_id: doc._id,
    target_url: doc.target_url,
    event: events[0] ?? doc.event,
    events,
    filter: doc.filter ? filterOf(doc.filter) : null,
    created_at: toIso(doc.created_at),
    enabled: disabled === null,
    disabled_reason: disabled?.reason ?? null,
    disabled_at: disabled ? toIso(disabled.at) : null,
  };
}

export function toAdminHookResponse(doc: HookDoc, now = new Date()): AdminHookResponse {
  return { ...toHookResponse(doc, now), created_by_key_id: doc.created_by_key_id ?? null };
}

/**
 * The category of a recorded error. Attempts recorded before categories existed hold free text
 * (which could name an address or carry a system message): it is mapped, never shown.
 */
export function errorCategory(recorded: string | null, statusCode: number | null): DeliveryError | null {
  if (recorded === null) return statusCode === null || (statusCode >= 200 && statusCode < 300) ? null : 'http_status';
  if ((DELIVERY_ERRORS as readonly string[]).includes(recorded)) return recorded as DeliveryError;
  if (statusCode !== null) return 'http_status';
  if (recorded.startsWith('timeout')) return 'timeout';
  if (recorded.startsWith('refused')) return 'refused_target';
  if (/ECONNREFUSED/.test(recorded)) return 'connection_refused';
  if (/ENOTFOUND|EAI_AGAIN|does not resolve/.test(recorded)) return 'dns_failure';
  if (/TLS|SSL|CERT/.test(recorded)) return 'tls_error';
  return 'connection_reset';
}

export function toAttemptResponse(attempt: ListedAttempt): DeliveryAttemptResponse {
  const nextAttemptAt = toIso(attempt.next_retry_at);
  return {
    event_id: attempt.event_id,
    type: attempt.event_type,
    event_type: attempt.event_type,
    attempt: attempt.attempt,
    succeeded: attempt.succeeded,
    response_status: attempt.status_code,
    response_body: attempt.status_code === null ? null : (attempt.response_body ?? ''),
    error: attempt.succeeded ? null : errorCategory(attempt.error, attempt.status_code),
    duration_ms: attempt.duration_ms,
    next_attempt_at: nextAttemptAt,
    attempted_at: toIso(attempt.attempted_at),
    status_code: attempt.status_code,
    next_retry_at: nextAttemptAt,
  };
}

/** A hook's filter as a subscriber writes and reads it. */
export type HookFilterBody = z.infer<typeof hookFilter>;

/** A hook's filter as shown: only the parts it has. */
export function filterOf(filter: HookFilter): HookFilterBody {
  return {
    ...(filter.pipeline_id !== undefined ? { pipeline_id: filter.pipeline_id } : {}),
    ...(filter.exclude_actors?.length ? { exclude_actors: [...filter.exclude_actors] } : {}),
    ...(filter.changes?.length ? { changes: conditionsToOutput(filter.changes) } : {}),
  };
}

/** A filter as stored: only the parts given, `changes` as its judged conditions (judgeChangeFilter). */
export function storedFilter(filter: HookFilterBody, changes: ChangeCondition[] | undefined): HookFilter {
  return {
    ...(filter.pipeline_id !== undefined ? { pipeline_id: filter.pipeline_id } : {}),
    ...(filter.exclude_actors?.length ? { exclude_actors: [...filter.exclude_actors] } : {}),
    ...(changes?.length ? { changes } : {}),
  };
}
