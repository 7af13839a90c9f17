import {
  EVENT_BATCH_JOB,
  EVENT_QUEUES,
  REPUBLISHED_JOB,
  type EventQueue,
  type PlannedBatch,
} from '../contracts/jobs.js';
import { feedChannel } from '../shared/change-feeds.js';
import { Coalescer } from '../shared/coalesce.js';
import { clearPublished, eventBytes } from '../shared/outbox.js';
import { createEventProducer, DEFAULT_JOB_OPTIONS, type QueueSettings } from '../shared/queues.js';
import { withTimeout } from '../shared/time.js';
import { inPublishSpan, jobTraceMetadata } from '../telemetry/events.js';
import { EventsRepository, type EventConsumer } from './repository.js';
import { SequencerStore } from './sequencer-store.js';
import { EventSequencer, type SequencerDeps } from './sequencer.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { Logger } from '../shared/logger.js';
import type { EventPublisher, OutboxCollection } from '../shared/outbox.js';
import type { RedisClient } from '../shared/redis.js';
import type { FlowProducer } from 'bullmq';
import type { Db } from 'mongodb';

/**
 * Moves recorded events from the outbox of their documents to the `events` collection (their durable
 * home), unsequenced, and clears the outbox; the sequencer (sequencer.ts) then gives them their place in
 * the feed and hands them to the queues. Used by the API right after a write (so delivery is normally
 * immediate) and by the relay for whatever is left. The move needs neither Redis nor the sequencer.
 */
const FAST_PATH_TIMEOUT_MS = 2_000;
/**
 * Under load, how long events wait to share one move (record in `events`, clear the outbox) with those
 * of other writes, so its two MongoDB round trips are shared. An event after a quiet moment leaves at
 * once; none waits longer than this.
 */
export const OUTBOX_MOVE_INTERVAL_MS = 25;

type Recorded = { collection: OutboxCollection; documentId: string; events: EventEnvelope[] };

/** An event and the consumers still to run it (all of them for a new event). */
export interface QueuedEvent {
  event: EventEnvelope;
  consumers: readonly EventConsumer[];
}

export interface QueueEventPublisherOptions {
  eventStore?: EventsRepository;
  retentionDays?: number;
  /** Run a sequencer candidate in this process (default true); one process at a time holds the lease. */
  sequencer?: boolean;
  sequencerLeaseMs?: number;
  /** The record history the sequencer writes with each batch (built by src/container.ts createEventPublisher). */
  history: SequencerDeps['history'];
}

export class QueueEventPublisher implements EventPublisher {
  private readonly producer: FlowProducer;
  readonly eventStore: EventsRepository;
  readonly sequencer: EventSequencer;
  /** Writes arriving together share one move and one clearing write per collection. */
  private readonly recorded = new Coalescer<Recorded>((batch) => this.moveBatch(batch), {
    minIntervalMs: OUTBOX_MOVE_INTERVAL_MS,
  });

  constructor(
    private readonly db: Db,
    private readonly settings: QueueSettings,
    private readonly logger: Logger,
    options: QueueEventPublisherOptions,
  ) {
    this.eventStore = options.eventStore ?? new EventsRepository(db, options.retentionDays);
    this.producer = createEventProducer(settings);
    this.producer.on('error', () => {}); // outages are expected; the relay retries
    const channel = feedChannel(settings.prefix);
    this.sequencer = new EventSequencer({
      events: this.eventStore,
      store: new SequencerStore(db),
      publish: (batches) => this.enqueueBatches(batches),
      announce: (companyIds) => {
        const redis = settings.connection as RedisClient;
        if (!this.isConnected() || typeof redis.publish !== 'function') return;
        for (const companyId of companyIds) void redis.publish(channel, companyId).catch(() => {});
      },
      logger,
      leaseMs: options.sequencerLeaseMs,
      history: options.history,
    });
    if (options.sequencer ?? true) this.sequencer.start();
  }

  isConnected(): boolean {
    const connection = this.settings.connection as { status?: string };
    return connection.status === undefined || connection.status === 'ready';
  }

  /**
   * Adds events to the queues of the consumers still to run them; false when Redis did not take them.
   * `republished` marks copies of events that may have run already (the consumers check MongoDB first).
   */
  async enqueue(events: QueuedEvent[], options: { republished?: boolean } = {}): Promise<boolean> {
    // BullMQ would wait for a lost connection to come back; fail now instead, MongoDB keeps the events.
    if (!this.isConnected()) return false;
    if (events.length === 0) return true;
    try {
      await publishEvents(this.producer, events, options);
      return true;
    } catch (error) {
      this.logger.debug({ err: error, events: events.length }, 'queues did not take the events');
      return false;
    }
  }

  /**
   * Moves the events of many documents to `events` and clears them from their documents, then wakes
   * the sequencer. Throws only when MongoDB failed (the outbox then still holds them).
   */
  async publishAndClear(
    collection: OutboxCollection,
    documents: Array<{ documentId: string; companyId?: string; events: EventEnvelope[] }>,
  ): Promise<void> {
    const events = documents.flatMap((document) => document.events);
    await inPublishSpan(events, () => this.move(collection, documents, events), 'outbox move');
    this.sequencer.wake();
  }

  private async move(
    collection: OutboxCollection,
    documents: Array<{ documentId: string; companyId?: string; events: EventEnvelope[] }>,
    events: EventEnvelope[],
  ): Promise<void> {
    await this.eventStore.record(events);
    await clearPublished(
      this.db.collection(collection),
      documents.flatMap(({ documentId, companyId, events: moved }) => {
        const company = companyId ?? moved[0]?.company_id;
        return company && moved.length > 0
          ? [
              {
                documentId,
                companyId: company,
                eventIds: moved.map((event) => event.event_id),
                bytes: eventBytes(moved),
              },
            ]
          : [];
      }),
    );
  }

  /** Adds a batch of sequenced events to every event queue; false when Redis did not take them. */
  private async enqueueBatches(batches: PlannedBatch[]): Promise<boolean> {
    if (!this.isConnected()) return false;
    try {
      // In the events' trace (the request that caused them), so the consumers' jobs continue it.
      await inPublishSpan(
        batches.flatMap((batch) => batch.events),
        () => publishEventBatches(this.producer, batches),
      );
      return true;
    } catch (error) {
      this.logger.debug({ err: error, batches: batches.length }, 'queues did not take the events');
      return false;
    }
  }

  /** Hands just-recorded events to the next move, a moment later; never throws, never delays the caller. */
  publishRecorded(collection: OutboxCollection, documentId: string, events: EventEnvelope[]): void {
    void this.recorded.add({ collection, documentId, events });
  }

  private async moveBatch(batch: Recorded[]): Promise<void> {
    await Promise.all(
      [...new Set(batch.map((entry) => entry.collection))].map((collection) => {
        const documents = batch.filter((entry) => entry.collection === collection);
        return withTimeout(this.publishAndClear(collection, documents), FAST_PATH_TIMEOUT_MS).catch((error) => {
          this.logger.debug({ err: error, documents: documents.length }, 'fast-path move failed; the relay will');
        });
      }),
    );
  }

  /** Resolves once every event handed over so far has been moved (or left to the relay); stays open. */
  settled(): Promise<void> {
    return this.recorded.close();
  }

  async close(): Promise<void> {
    await this.recorded.close(); // each move is bounded by FAST_PATH_TIMEOUT_MS
    await this.sequencer.stop();
    await this.producer.close();
  }
}
/**
 * Adds a move's batches to every event queue (one job per batch and queue), in one atomic round trip.
 * Each job continues the trace of its first event that has one (the publish span's, when it is in
 * that trace); its consumers run every other event in that event's own trace.
 */
export async function publishEventBatches(producer: FlowProducer, batches: PlannedBatch[]): Promise<void> {
  await producer.addBulk(
    batches.flatMap(({ jobId, events }) => {
      const traced = events.find((event) => event.traceparent);
      const metadata = traced ? jobTraceMetadata(traced) : undefined;
      return EVENT_QUEUES.map((queueName) => ({
        name: EVENT_BATCH_JOB,
        queueName,
        data: { events },
        opts: { ...DEFAULT_JOB_OPTIONS, jobId, ...(metadata ? { telemetry: { metadata } } : {}) },
      }));
    }),
  );
}

/**
 * Adds each event to the queues of the consumers still to run it, with jobId = event_id, so a
 * re-publish of an event BullMQ still holds is a no-op.
 */
export async function publishEvents(
  producer: FlowProducer,
  events: Array<{ event: EventEnvelope; consumers: readonly EventQueue[] }>,
  options: { republished?: boolean } = {},
): Promise<void> {
  await producer.addBulk(
    events.flatMap(({ event, consumers }) =>
      // A FlowProducer does not apply a queue's defaults; each job carries them.
      consumers.map((queueName) => {
        // Each job continues its own event's trace, whichever traces the batch mixes.
        const metadata = jobTraceMetadata(event);
        return {
          name: options.republished ? REPUBLISHED_JOB : event.type,
          queueName,
          data: event,
          opts: { ...DEFAULT_JOB_OPTIONS, jobId: event.event_id, ...(metadata ? { telemetry: { metadata } } : {}) },
        };
      }),
    ),
  );
}
