import { resourceOf } from './envelope.js';
import type { Changes, EventActor, EventEnvelope, EventType } from './envelope.js';

/** The kinds of record that have a history: the resources of the item.* and task.* events. */
export type RecordKind = 'item' | 'task';

/**
 * One change of one record, as the history keeps it for HISTORY_RETENTION_DAYS (docs/items.md, "History").
 * `_id` is the event_id, so a row written twice (a sequencer batch replayed) is one row. `snapshot` is the
 * event's `data`: the record in its API shape right after the change (the item as it was, for a delete),
 * which is what `as_of` answers.
 */
export interface HistoryRow {
  _id: string;
  company_id: string;
  kind: RecordKind;
  resource_id: string;
  sequence: number;
  occurred_at: Date;
  type: EventType;
  actor: EventActor;
  /** Items only: the item's version after the change. */
  version?: number;
  changes: Changes | null;
  snapshot: Record<string, unknown>;
  expires_at: Date;
}

const DAY_MS = 24 * 3_600_000;

function kindOf(type: EventType): RecordKind {
  return resourceOf(type) === 'item' ? 'item' : 'task';
}

/**
 * The history rows of sequenced events: one per item.* or task.* event, none for an erased event (its
 * values are gone; the record's history with it).
 */
export function historyRowsOf(
  events: Array<{ event: EventEnvelope & { erased?: true }; sequence: number }>,
  retentionDays: number,
): HistoryRow[] {
  const rows: HistoryRow[] = [];
  for (const { event, sequence } of events) {
    if (event.erased) continue;
    const kind = kindOf(event.type);
    const id = kind === 'item' ? event.data.item_id : event.data.task_id;
    if (typeof id !== 'string') continue;
    const occurredAt = new Date(event.occurred_at);
    const version = event.data.version;
    rows.push({
      _id: event.event_id,
      company_id: event.company_id,
      kind,
      resource_id: id,
      sequence,
      occurred_at: occurredAt,
      type: event.type,
      actor: event.actor,
      ...(kind === 'item' && typeof version === 'number' ? { version } : {}),
      changes: event.changes ?? null,
      snapshot: event.data,
      expires_at: new Date(occurredAt.getTime() + retentionDays * DAY_MS),
    });
  }
  return rows;
}
