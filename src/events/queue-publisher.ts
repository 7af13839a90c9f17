import type { FlowProducer } from 'bullmq';
import type { Db } from 'mongodb';
import { Coalescer } from '../shared/coalesce.js';
import type { Logger } from '../shared/logger.js';
import { withTimeout } from '../shared/time.js';
import { createEventProducer, publishEvents, type QueueSettings } from '../shared/queues.js';
import type { EventEnvelope } from './envelope.js';
import { clearPublished } from './outbox.js';
import type { EventPublisher, OutboxCollection } from './publisher.js';

/**
 * Publishes recorded events to the event queues and then clears them from the outbox. Used by the
 * API right after a write (so delivery is normally immediate) and by the relay for whatever is left.
 * The connection fails fast while Redis is down; the events then simply wait in MongoDB.
 */
const FAST_PATH_TIMEOUT_MS = 2_000;

type Recorded = { collection: OutboxCollection; documentId: string; events: EventEnvelope[] };

export class QueueEventPublisher implements EventPublisher {
  private readonly producer: FlowProducer;
  /** Writes arriving together share one publish and one clearing write per collection. */
  private readonly recorded = new Coalescer<Recorded>((batch) => this.publishBatch(batch));

  constructor(
    private readonly db: Db,
    private readonly settings: QueueSettings,
    private readonly logger: Logger,
  ) {
    this.producer = createEventProducer(settings);
    this.producer.on('error', () => {}); // outages are expected; the relay retries
  }

  private isConnected(): boolean {
    const connection = this.settings.connection as { status?: string };
    return connection.status === undefined || connection.status === 'ready';
  }

  /**
   * Publishes the events of many documents (one round trip for all queues) and then clears them from their
   * documents; throws when Redis did not accept them, in which case they stay in the outbox.
   */
  async publishAndClear(collection: OutboxCollection, documents: Array<{ documentId: string; events: EventEnvelope[] }>): Promise<void> {
    // BullMQ would wait for a lost connection to come back; fail now instead, the outbox keeps the events.
    if (!this.isConnected()) throw new Error('redis is not connected');
    const events = documents.flatMap((document) => document.events);
    if (events.length > 0) await publishEvents(this.producer, events);
    await clearPublished(
      this.db.collection(collection),
      documents.map(({ documentId, events: published }) => ({ documentId, eventIds: published.map((event) => event.event_id) })),
    );
  }

  /** Hands just-recorded events to the next flush, a moment later; never throws, never delays the caller. */
  publishRecorded(collection: OutboxCollection, documentId: string, events: EventEnvelope[]): void {
    // While Redis is away BullMQ would wait for it; the events are safe in the outbox, so skip at once.
    if (!this.isConnected()) return;
    void this.recorded.add({ collection, documentId, events });
  }

  private async publishBatch(batch: Recorded[]): Promise<void> {
    await Promise.all(
      [...new Set(batch.map((entry) => entry.collection))].map((collection) => {
        const documents = batch.filter((entry) => entry.collection === collection);
        return withTimeout(this.publishAndClear(collection, documents), FAST_PATH_TIMEOUT_MS).catch((error) => {
          this.logger.debug({ err: error, documents: documents.length }, 'fast-path publish failed; the relay will deliver');
        });
      }),
    );
  }

  async close(): Promise<void> {
    await this.recorded.close(); // each batch is bounded by FAST_PATH_TIMEOUT_MS
    await this.producer.close();
  }
}
