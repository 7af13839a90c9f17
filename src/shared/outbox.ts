import type { Collection, Db, Document, Filter, UpdateFilter, WithId } from 'mongodb';

/**
 * The transactional outbox without transactions: events are written into the changed document itself
 * (`pending_events`), in the same single-document write as the change, so a change is never stored
 * without its events. The relay publishes them and then removes exactly those it published.
 */
/** What the outbox needs of an event; the events themselves are the contracts' envelopes. */
export interface OutboxEvent {
  event_id: string;
}

/** Where a full outbox's events go first (the events feature's store). */
export interface OutboxOverflow {
  record(events: OutboxEvent[]): Promise<unknown>;
}

export interface OutboxFields<Event extends OutboxEvent = OutboxEvent> {
  pending_events?: Event[];
  /** Set whenever events are pending; the relay finds documents through an index on it. */
  outbox_pending?: true;
  /** Approximate size of `pending_events` (JSON bytes), for the cap below. */
  outbox_bytes?: number;
}

/**
 * The last-resort bound of a document's outbox (docs/events.md). Normally the web process and the
 * relay move events out within moments, whatever Redis does; should neither run for long, a write
 * that would take the outbox past this size first moves the pending events to `events` itself.
 * With items of at most 1 MiB and events of at most a few MiB, no document gets near 16 MiB.
 */
export const OUTBOX_MAX_BYTES = 4 * 1024 * 1024;

/** Each envelope's size, measured once: the write adds it to `outbox_bytes` and the clearing takes the same off. */
const sizes = new WeakMap<OutboxEvent, number>();

export function eventBytes(events: OutboxEvent[]): number {
  let bytes = 0;
  for (const event of events) {
    let size = sizes.get(event);
    if (size === undefined) sizes.set(event, (size = JSON.stringify(event).length));
    bytes += size;
  }
  return bytes;
}

/** The collections whose documents carry an outbox; the relay and the metrics go through this list. */
export const OUTBOX_COLLECTIONS = ['items', 'tasks', 'hooks'] as const;
export type OutboxCollection = (typeof OUTBOX_COLLECTIONS)[number];

/** Declared by the repository of each collection in OUTBOX_COLLECTIONS. */
export const OUTBOX_INDEX = { key: { outbox_pending: 1 }, name: 'outbox_pending', sparse: true } as const;

export function outboxOnInsert<Event extends OutboxEvent>(events: Event[]): Required<OutboxFields<Event>> {
  return { pending_events: events, outbox_pending: true, outbox_bytes: eventBytes(events) };
}

/**
 * The compare-and-set write of a change with its events: matches only while `counter` still has the
 * value the caller read, sets the change, bumps the counter and appends the events, all in one
 * document write. Returns the document after the change, or null when someone else wrote first.
 * When the outbox is too full to take the events, they are moved to `events` first (rare; see
 * OUTBOX_MAX_BYTES), so the outbox stays bounded and nothing is lost.
 */
export async function updateWithEvents<T extends Document & OutboxFields>(
  collection: Collection<T>,
  filter: Filter<T>,
  counter: { field: string; expected: number },
  changes: Partial<T>,
  events: OutboxEvent[],
  eventStore: OutboxOverflow,
): Promise<WithId<T> | null> {
  const outbox = outboxOnUpdate(events);
  const update = {
    $set: { ...changes, ...outbox.$set },
    $inc: { [counter.field]: 1, ...outbox.$inc },
    $push: outbox.$push,
  } as unknown as UpdateFilter<T>;
  const expected = { ...filter, [counter.field]: counter.expected } as Filter<T>;
  const room = { outbox_bytes: { $not: { $gt: OUTBOX_MAX_BYTES - outbox.$inc.outbox_bytes } } };
  const write = () =>
    collection.findOneAndUpdate({ ...expected, ...room }, update, {
      returnDocument: 'after',
      projection: { pending_events: 0 },
    });
  const saved = await write();
  if (saved) return saved;
  // No match: a lost race (the caller re-reads), or an outbox without room for these events.
  const full = await collection.findOne(expected, { projection: { company_id: 1, pending_events: 1 } });
  if (!full?.pending_events?.length) return null;
  await moveOutboxes(collection as unknown as Collection<Document>, [full], eventStore);
  return write();
}

/** Update operators that append events; merge them into the change's own update. */
export function outboxOnUpdate(events: OutboxEvent[]) {
  return {
    $push: { pending_events: { $each: events } },
    $set: { outbox_pending: true as const },
    $inc: { outbox_bytes: eventBytes(events) },
  };
}

/**
 * Moves documents' pending events to the events collection (the sequencer takes them from there).
 * Used by the outbox cap above.
 */
export async function moveOutboxes(
  collection: Collection<Document>,
  docs: Array<WithId<Document>>,
  eventStore: OutboxOverflow,
): Promise<number> {
  const moved = docs.map((doc) => ({
    documentId: String(doc._id),
    companyId: String(doc.company_id),
    events: (doc.pending_events ?? []) as OutboxEvent[],
  }));
  const events = moved.flatMap((entry) => entry.events);
  await eventStore.record(events);
  await clearPublished(
    collection,
    moved.map(({ documentId, companyId, events: published }) => ({
      documentId,
      companyId,
      eventIds: published.map((event) => event.event_id),
      bytes: eventBytes(published),
    })),
  );
  return events.length;
}

export interface PublishedEvents {
  documentId: string;
  /** In every filter, so each write is targeted on a cluster sharded by company_id (docs/scaling.md). */
  companyId: string;
  eventIds: string[];
  /** Their eventBytes, taken off the document's outbox_bytes when other events stay. */
  bytes: number;
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
    published.map(({ documentId, companyId, eventIds }) => ({
      updateOne: {
        filter: {
          company_id: companyId,
          _id: documentId as never,
          pending_events: { $size: eventIds.length },
          'pending_events.event_id': { $all: eventIds },
        },
        update: { $unset: { pending_events: '', outbox_pending: '', outbox_bytes: '' } },
      },
    })),
    { ordered: false },
  );
  if (whole.matchedCount === published.length) return;
  await collection.bulkWrite(
    published.map(({ documentId, companyId, eventIds, bytes }) => ({
      updateOne: {
        filter: { company_id: companyId, _id: documentId as never, 'pending_events.event_id': { $in: eventIds } },
        update: {
          $pull: { pending_events: { event_id: { $in: eventIds } } },
          $inc: { outbox_bytes: -bytes },
        } as never,
      },
    })),
    { ordered: false },
  );
  await collection.bulkWrite(
    published.map(({ documentId, companyId }) => ({
      updateOne: {
        filter: { company_id: companyId, _id: documentId as never, pending_events: { $size: 0 } },
        update: { $unset: { pending_events: '', outbox_pending: '', outbox_bytes: '' } },
      },
    })),
    { ordered: false },
  );
}

/**
 * Documents with pending events, in bounded batches and in no particular order (no sort, so MongoDB promises none):
 * each document's events stay in their order and documents do not depend on one another.
 */
export function findPending(db: Db, collection: OutboxCollection, limit: number) {
  return db
    .collection(collection)
    .find({ outbox_pending: true }, { projection: { _id: 1, company_id: 1, pending_events: 1 } })
    .limit(limit)
    .toArray();
}

/** Per outbox collection, the documents whose events are not yet on the queues (the outbox gauge). */
export async function countPendingOutboxes(db: Db): Promise<Array<{ collection: OutboxCollection; pending: number }>> {
  return Promise.all(
    OUTBOX_COLLECTIONS.map(async (collection) => ({
      collection,
      pending: await db.collection(collection).countDocuments({ outbox_pending: true }),
    })),
  );
}

/**
 * The fast path after a write: try to hand the just-recorded events to the queues at once. It never
 * throws and never delays the response; whatever it cannot publish stays in the outbox for the relay.
 */
export interface EventPublisher<Event extends OutboxEvent = OutboxEvent> {
  publishRecorded(collection: OutboxCollection, documentId: string, events: Event[]): void;
  close(): Promise<void>;
}

/** Leaves everything to the relay (used where no queue connection exists). */
export const relayOnlyPublisher: EventPublisher<never> = {
  publishRecorded() {},
  async close() {},
};
