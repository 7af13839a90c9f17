import { z } from 'zod';
import { EVENT_TYPES } from '../events/envelope.js';
import { isoTimestampOutput, toIso } from '../shared/time.js';
import type { ListedAttempt } from './deliveries.repository.js';
import type { HookDoc } from './repository.js';

export const HOOK_EVENTS = [...EVENT_TYPES, '*'] as const;

const example = {
  hook_id: 'hk_6740b7a1c2d3e4f5a6b7c8d9',
  target_url: 'https://hooks.example.com/pipeline-records',
  event: 'task.created',
  created_at: '2026-11-20T08:00:00.000Z',
  disabled_at: null,
};

/** One entity schema; the creation response adds the secret. */
export const hookSchema = z
  .object({
    hook_id: z.string(),
    target_url: z.string(),
    event: z.enum(HOOK_EVENTS).describe('The event type delivered, or * for every type'),
    created_at: isoTimestampOutput,
    disabled_at: isoTimestampOutput
      .nullable()
      .describe('Set when every delivery failed for 5 days; subscribing again or a redelivery re-enables the hook'),
  })
  .meta({ id: 'Hook', example });

// Same fields as the entity, in the documented order, with the secret after `event`.
const { hook_id, target_url, event, created_at, disabled_at } = hookSchema.shape;
export const createdHookSchema = z
  .object({
    hook_id,
    target_url,
    event,
    secret: z.string().describe('Standard Webhooks signing secret (`whsec_...`); shown only in this response'),
    created_at,
    disabled_at,
  })
  .meta({ id: 'HookWithSecret', example: { ...example, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' } });

export const createHookBody = z
  .strictObject({
    target_url: z
      .url({ protocol: /^https?$/ })
      .max(2_000)
      .describe('http(s) URL that receives signed POSTs; private, loopback and metadata addresses are refused'),
    event: z.enum(HOOK_EVENTS),
  })
  .meta({ example: { target_url: 'https://hooks.example.com/pipeline-records', event: 'task.created' } });

export type CreateHookBody = z.infer<typeof createHookBody>;

export const deliveryAttemptSchema = z
  .object({
    event_id: z.string().describe('Also the webhook-id header of the delivery'),
    event_type: z.enum(EVENT_TYPES),
    attempt: z
      .number()
      .int()
      .min(1)
      .max(50)
      .describe('1 for the first try; redeliveries count from 1 again')
      .meta({ example: 1 }),
    status_code: z
      .number()
      .int()
      .min(100)
      .max(999)
      .nullable()
      .describe('The receiver answer, null when none arrived')
      .meta({ example: 200 }),
    error: z
      .string()
      .nullable()
      .describe('Why the attempt failed without an answer (timeout, refused, connection error)'),
    duration_ms: z.number().int().min(0).max(86_400_000).meta({ example: 84 }),
    succeeded: z.boolean(),
    next_retry_at: isoTimestampOutput.nullable().describe('When the next attempt is due; null when none will follow'),
    attempted_at: isoTimestampOutput,
  })
  .meta({
    id: 'HookDeliveryAttempt',
    example: {
      event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9',
      event_type: 'task.created',
      attempt: 2,
      status_code: 503,
      error: null,
      duration_ms: 41,
      succeeded: false,
      next_retry_at: '2026-11-20T08:01:30.000Z',
      attempted_at: '2026-11-20T08:00:30.000Z',
    },
  });

export const redeliverySchema = z
  .object({ hook_id: z.string(), event_id: z.string(), status: z.literal('queued') })
  .meta({
    id: 'HookRedelivery',
    example: { hook_id: 'hk_6740b7a1c2d3e4f5a6b7c8d9', event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9', status: 'queued' },
  });

export type HookResponse = z.infer<typeof hookSchema>;
export type CreatedHookResponse = z.infer<typeof createdHookSchema>;
export type DeliveryAttemptResponse = z.infer<typeof deliveryAttemptSchema>;

/** The one mapping from a stored hook to its API shape; the secret and failure bookkeeping never leave. */
export function toHookResponse(doc: HookDoc): HookResponse {
  return {
    hook_id: doc._id,
    target_url: doc.target_url,
    event: doc.event,
    created_at: toIso(doc.created_at),
    disabled_at: toIso(doc.disabled_at),
  };
}

export function toAttemptResponse(attempt: ListedAttempt): DeliveryAttemptResponse {
  return {
    event_id: attempt.event_id,
    event_type: attempt.event_type,
    attempt: attempt.attempt,
    status_code: attempt.status_code,
    error: attempt.error,
    duration_ms: attempt.duration_ms,
    succeeded: attempt.succeeded,
    next_retry_at: toIso(attempt.next_retry_at),
    attempted_at: toIso(attempt.attempted_at),
  };
}
