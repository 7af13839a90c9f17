import { z } from 'zod';
import { limitSchema } from '../shared/pagination.js';
import { isoTimestampOutput, isoTimestampQuery, toIso } from '../shared/time.js';
import { eventActorSchema, MAX_SEQUENCE, sequenceSchema } from './envelope.js';
import type { HistoryRow } from './history-rows.js';

const ITEM_TYPES = ['item.created', 'item.updated', 'item.deleted'] as const;
const TASK_TYPES = ['task.created', 'task.updated', 'task.completed', 'task.overdue', 'task.deleted'] as const;

const changesSchema = z
  .record(z.string(), z.object({ from: z.unknown(), to: z.unknown() }))
  .nullable()
  .describe(
    'Field by field, what the change changed (custom fields by name); null for a create, a delete, a completion or an overdue. Values over 4 KiB are TruncatedValue markers, as in events',
  );

const historyEntryBase = z.object({
  sequence: sequenceSchema,
  occurred_at: isoTimestampOutput,
  actor: eventActorSchema,
  changes: changesSchema,
});

export const itemHistoryEntrySchema = historyEntryBase
  .extend({
    type: z.enum(ITEM_TYPES),
    version: z.number().int().min(1).max(MAX_SEQUENCE).describe("The item's version after the change").meta({
      example: 3,
    }),
  })
  .meta({
    id: 'ItemHistoryEntry',
    description: 'One change of an item, as its event recorded it',
    example: {
      sequence: 1042,
      occurred_at: '2026-11-22T09:30:00.000Z',
      type: 'item.updated',
      actor: { type: 'api_key', id: 'key_6740b7a1c2d3e4f5a6b7c8d3' },
      version: 3,
      changes: { stage: { from: 'stg_6740b7a1c2d3e4f5a6b7c8d1', to: 'stg_6740b7a1c2d3e4f5a6b7c8d2' } },
    },
  });

export const taskHistoryEntrySchema = historyEntryBase.extend({ type: z.enum(TASK_TYPES) }).meta({
  id: 'TaskHistoryEntry',
  description: 'One change of a task, as its event recorded it',
  example: {
    sequence: 1043,
    occurred_at: '2026-11-22T09:31:00.000Z',
    type: 'task.updated',
    actor: { type: 'api_key', id: 'key_6740b7a1c2d3e4f5a6b7c8d3' },
    changes: { is_completed: { from: false, to: true } },
  },
});

export type ItemHistoryEntry = z.infer<typeof itemHistoryEntrySchema>;
export type TaskHistoryEntry = z.infer<typeof taskHistoryEntrySchema>;

export const historyQuery = z.strictObject({ limit: limitSchema, cursor: z.string().max(1_000).optional() });
export type HistoryQuery = z.infer<typeof historyQuery>;

/** `?as_of=` on GET item: ISO 8601 (or a calendar date, its start in UTC), not in the future. */
export const asOfQuery = z.strictObject({
  as_of: isoTimestampQuery
    .refine((at) => at.getTime() <= Date.now(), 'must not be in the future')
    .optional()
    .describe(
      'Answer the item as it was at this time (ISO 8601): 404 when it did not exist then or the time is older than HISTORY_RETENTION_DAYS',
    )
    .meta({ example: '2026-11-22T09:30:00Z' }),
});

/** The one mapping from a stored history row to its API shape. */
export function toHistoryEntry(row: HistoryEntryRow): ItemHistoryEntry | TaskHistoryEntry {
  return {
    sequence: row.sequence,
    occurred_at: toIso(row.occurred_at),
    type: row.type,
    actor: row.actor,
    ...(row.kind === 'item' ? { version: row.version ?? 1 } : {}),
    changes: row.changes,
  } as ItemHistoryEntry | TaskHistoryEntry;
}

export type HistoryEntryRow = Pick<
  HistoryRow,
  '_id' | 'sequence' | 'occurred_at' | 'type' | 'actor' | 'version' | 'changes' | 'kind'
>;
