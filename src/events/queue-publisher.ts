import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Db } from 'mongodb';
import type { Logger } from '../shared/logger.js';
import { createQueue, EVENT_QUEUES, publishEvents, type QueueSettings } from '../shared/queues.js';
import type { EventEnvelope } from './envelope.js';
import { clearPublished } from './outbox.js';
import type { EventPublisher, OutboxCollection } from './publisher.js';

/**
 * Publishes recorded events to the event queues and then clears them from the outbox. Used by the
 * API right after a write (so delivery is normally immediate) and by the relay for whatever is left.
 * The connection fails fast while Redis is down; the events then simply wait in MongoDB.
 */
export class QueueEventPublisher implements EventPublisher {
  private readonly queues: Array<Queue<EventEnvelope, unknown, string>>;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly db: Db,
    settings: QueueSettings,
    private readonly logger: Logger,
  ) {
    this.queues = EVENT_QUEUES.map((name) => createQueue(name, settings));
    for (const queue of this.queues) queue.on('error', () => {}); // outages are expected; the relay retries
  }

  /** Publishes and clears; throws when Redis did not accept the events (they stay in the outbox). */
  async publishAndClear(collection: OutboxCollection, documentId: string, events: EventEnvelope[]): Promise<void> {
    if (events.length > 0) await publishEvents(this.queues, events);
    await clearPublished(this.db.collection(collection), documentId, events.map((event) => event.event_id));
  }

  publishRecorded(collection: OutboxCollection, documentId: string, events: EventEnvelope[]): void {
    const attempt = this.publishAndClear(collection, documentId, events).catch((error) => {
      this.logger.debug({ err: error, documentId }, 'fast-path publish failed; the relay will deliver');
    });
    this.inFlight.add(attempt);
    void attempt.finally(() => this.inFlight.delete(attempt));
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
    await Promise.all(this.queues.map((queue) => queue.close()));
  }
}

/** The connection the web process publishes with: no offline queue, so a Redis outage never delays a response. */
export function publisherConnection(redis: Redis): QueueSettings['connection'] {
  return redis;
}
