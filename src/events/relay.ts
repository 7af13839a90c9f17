import { findPending, OUTBOX_COLLECTIONS } from '../shared/outbox.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { Logger } from '../shared/logger.js';
import type { QueueEventPublisher } from './queue-publisher.js';
import type { Db } from 'mongodb';

const BATCH = 200;
const UNQUEUED_BATCH = 500;

export interface RelayPass {
  /** Events moved from document outboxes to `events`. */
  moved: number;
  /** Sequenced events handed to the queues after they waited in `events` (Redis was away when sequenced). */
  queued: number;
}

/**
 * One relay pass. First every document outbox is emptied into `events`, in bounded batches, whether
 * or not Redis answers (so no outbox grows while Redis is away; the sequencer takes them from there);
 * then, while Redis answers, the sequenced events no queue has taken yet are queued. Safe to run in
 * several processes at once: recording an event twice keeps the first, and jobId = event_id makes a
 * double publish a no-op.
 */
export async function relayPendingEvents(db: Db, publisher: QueueEventPublisher, logger: Logger): Promise<RelayPass> {
  const pass: RelayPass = { moved: 0, queued: 0 };
  for (const collection of OUTBOX_COLLECTIONS) {
    for (;;) {
      const pending = await findPending(db, collection, BATCH);
      if (pending.length === 0) break;
      const documents = pending.map((doc) => ({
        documentId: String(doc._id),
        companyId: String(doc.company_id),
        events: (doc.pending_events ?? []) as EventEnvelope[],
      }));
      const count = documents.reduce((sum, document) => sum + document.events.length, 0);
      await publisher.publishAndClear(collection, documents);
      pass.moved += count;
      if (pending.length < BATCH) break;
    }
  }
  while (publisher.isConnected()) {
    const unqueued = await publisher.eventStore.findUnqueued(UNQUEUED_BATCH);
    if (unqueued.length === 0) break;
    const toQueue = unqueued.map((doc) => ({ event: doc.event, consumers: doc.pending }));
    if (!(await publisher.enqueue(toQueue, { republished: true }))) break;
    await publisher.eventStore.markQueued(unqueued.map((doc) => doc.event));
    pass.queued += unqueued.length;
    if (unqueued.length < UNQUEUED_BATCH) break;
  }
  if (pass.moved > 0 || pass.queued > 0) logger.debug(pass, 'relay moved and queued events');
  return pass;
}
