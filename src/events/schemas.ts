import { z } from 'zod';
import {
  EVENT_TYPES,
  eventEnvelopeSchema,
  MAX_SEQUENCE,
  publicEnvelope,
  type EventEnvelope,
  type EventType,
  type PublicEnvelope,
} from '../contracts/envelope.js';
import { TASK_COMPLETED_EXAMPLE } from '../contracts/tasks.js';
import { boundedInteger, limitSchema, queryInteger } from '../shared/pagination.js';
import { isoTimestampQuery } from '../shared/time.js';

const example = {
  event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9',
  type: 'task.completed',
  company_id: 'cmp_6740b7a1c2d3e4f5a6b7c8d0',
  occurred_at: '2026-11-20T08:30:00.000Z',
  sequence: 1042,
  actor: { type: 'api_key', id: 'key_6740b7a1c2d3e4f5a6b7c8d3' },
  data: { ...TASK_COMPLETED_EXAMPLE.data, notes: 'Signed.' },
  changes: TASK_COMPLETED_EXAMPLE.changes,
};

/** One event as the feed shows it: exactly the envelope webhooks carry. */
export const feedEventSchema = eventEnvelopeSchema.meta({
  id: 'FeedEvent',
  description:
    'The event envelope, exactly as REST hooks receive it: at most 256 KiB, values over 4 KiB (custom fields of items, description and notes of tasks, in `data` and in `changes`) are TruncatedValue markers',
  example,
});

const typeList = z
  .string()
  .max(1_000)
  .transform((value, ctx) => {
    const types = [...new Set(value.split(',').map((type) => type.trim()))];
    const unknown = types.filter((type) => !(EVENT_TYPES as readonly string[]).includes(type));
    if (unknown.length > 0) {
      ctx.addIssue({
        code: 'custom',
        message: `unknown event type ${unknown.join(', ')}; expected some of ${EVENT_TYPES.join(', ')}`,
      });
      return z.NEVER;
    }
    return types as EventType[];
  })
  .meta({ example: 'task.created,task.completed' });

export const listEventsQuery = z
  .strictObject({
    type: typeList.optional().describe('Comma-separated event types'),
    occurred_after: isoTimestampQuery.optional(),
    occurred_before: isoTimestampQuery.optional(),
    resource_id: z.string().min(1).max(100).optional().describe('A task_id or item_id'),
    limit: limitSchema,
    cursor: z.string().max(1_000).optional(),
    after: queryInteger(boundedInteger(0, MAX_SEQUENCE))
      .optional()
      .meta({ example: 1042 })
      .describe('Start after this sequence (e.g. one taken from a webhook); not together with cursor'),
    wait: queryInteger(boundedInteger(0, 30).default(0)).describe(
      'Seconds (0-30) to wait for an event when none is readable after the position; the answer comes as soon as one is',
    ),
    exclude_actor: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe('Leave out the events this API key (a key_id of the company) caused'),
  })
  .superRefine((query, ctx) => {
    if (query.after !== undefined && query.cursor !== undefined)
      ctx.addIssue({ code: 'custom', path: ['after'], message: 'cannot be combined with cursor' });
    if (query.occurred_after && query.occurred_before && query.occurred_after > query.occurred_before)
      ctx.addIssue({ code: 'custom', path: ['occurred_after'], message: 'must not be after occurred_before' });
  });

export type ListEventsQuery = z.infer<typeof listEventsQuery>;
export type FeedEvent = PublicEnvelope & { sequence: number };

/** The one mapping from a stored (sequenced) event to the feed's shape: the webhook body (no internal fields). */
export function toFeedEvent(event: EventEnvelope, sequence = event.sequence ?? 0): FeedEvent {
  return { ...publicEnvelope(event), sequence };
}
