import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import type { EventEnvelope } from './envelope.js';
import { findPending } from './outbox.js';
import type { OutboxCollection } from './publisher.js';
import type { QueueEventPublisher } from './queue-publisher.js';

const OUTBOX_COLLECTIONS: OutboxCollection[] = ['items', 'tasks'];
const BATCH = 200;

/**
 * One relay pass: every document with pending events, in bounded batches, published then cleared.
 * Returns how many events went out. Safe to run in several processes at once: jobId = event_id
 * makes a double publish a no-op.
 */
export async function relayPendingEvents(db: Db, publisher: QueueEventPublisher, logger: Logger): Promise<number> {
  let published = 0;
  for (const collection of OUTBOX_COLLECTIONS) {
    for (;;) {
      const pending = await findPending(db.collection(collection), BATCH);
      if (pending.length === 0) break;
      const documents = pending.map((doc) => ({ documentId: String(doc._id), events: (doc.pending_events ?? []) as EventEnvelope[] }));
      await publisher.publishAndClear(collection, documents);
      published += documents.reduce((sum, document) => sum + document.events.length, 0);
      if (pending.length < BATCH) break;
    }
  }
  if (published > 0) logger.debug({ published }, 'relay published events');
  return published;
}
