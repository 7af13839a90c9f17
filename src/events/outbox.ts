import type { Collection, Document, Filter, UpdateFilter, WithId } from 'mongodb';
import type { EventEnvelope } from './envelope.js';

/**
 * The transactional outbox without transactions: events are written into the changed document itself
 * (`pending_events`), in the same single-document write as the change, so a change is never stored
 * without its events. The relay publishes them and then removes exactly those it published.
 */
export interface OutboxFields {
  pending_events?: EventEnvelope[];
  /** Set whenever events are pending; the relay finds documents through an index on it. */
  outbox_pending?: true;
}

export const OUTBOX_INDEX = { key: { outbox_pending: 1 }, name: 'outbox_pending', sparse: true } as const;

export function outboxOnInsert(events: EventEnvelope[]): Required<OutboxFields> {
  return { pending_events: events, outbox_pending: true };
}

/**
 * The compare-and-set write of a change with its events: matches only while `counter` still has the
 * value the caller read, sets the change, bumps the counter and appends the events, all in one
 * document write. Returns the document after the change, or null when someone else wrote first.
 */
export function updateWithEvents<T extends Document & OutboxFields>(
  collection: Collection<T>,
  filter: Filter<T>,
  counter: { field: string; expected: number },
  changes: Partial<T>,
  events: EventEnvelope[],
): Promise<WithId<T> | null> {
  const outbox = outboxOnUpdate(events);
  const update = { $set: { ...changes, ...outbox.$set }, $inc: { [counter.field]: 1 }, $push: outbox.$push } as unknown as UpdateFilter<T>;
  return collection.findOneAndUpdate({ ...filter, [counter.field]: counter.expected } as Filter<T>, update, {
    returnDocument: 'after',
    projection: { pending_events: 0 },
  });
}

/** Update operators that append events; merge them into the change's own update. */
export function outboxOnUpdate(events: EventEnvelope[]) {
  return {
    $push: { pending_events: { $each: events } },
    $set: { outbox_pending: true as const },
  };
}

export interface PublishedEvents {
  documentId: string;
  eventIds: string[];
}

/**
 * Removes published events from their documents. The usual case, a document whose pending events are
 * exactly the published ones, takes one write per document (all in one round trip) that drops the
 * events and the flag together. Documents that gained events meanwhile get the two-step fallback:
 * pull exactly the published events, then clear the flag only where nothing is left.
 */
export async function clearPublished(collection: Collection<Document>, published: PublishedEvents[]): Promise<void> {
  if (published.length === 0) return;
  const whole = await collection.bulkWrite(
    published.map(({ documentId, eventIds }) => ({
      updateOne: {
        filter: { _id: documentId as never, pending_events: { $size: eventIds.length }, 'pending_events.event_id': { $all: eventIds } },
        update: { $unset: { pending_events: '', outbox_pending: '' } },
      },
    })),
    { ordered: false },
  );
  if (whole.matchedCount === published.length) return;
  await collection.bulkWrite(
    published.map(({ documentId, eventIds }) => ({
      updateOne: { filter: { _id: documentId as never }, update: { $pull: { pending_events: { event_id: { $in: eventIds } } } as never } },
    })),
    { ordered: false },
  );
  await collection.updateMany(
    { _id: { $in: published.map(({ documentId }) => documentId as never) }, pending_events: { $size: 0 } },
    { $unset: { pending_events: '', outbox_pending: '' } },
  );
}

/** Documents with pending events, oldest first, in bounded batches. */
export function findPending(collection: Collection<Document>, limit: number) {
  return collection
    .find({ outbox_pending: true }, { projection: { _id: 1, company_id: 1, pending_events: 1 } })
    .limit(limit)
    .toArray();
}
