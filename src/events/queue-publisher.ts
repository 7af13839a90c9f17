import { Coalescer } from '../shared/coalesce.js';
import {
  createEventProducer,
  createQueue,
  jobStillQueued,
  planEventBatches,
  publishEventBatches,
  publishEvents,
  type PlannedBatch,
  type Queues,
  type QueueSettings,
} from '../shared/queues.js';
import { withTimeout } from '../shared/time.js';
import { inPublishSpan } from '../telemetry/events.js';
import { clearPublished, eventBytes } from './outbox.js';
import { EVENT_CONSUMERS, EventsRepository, type EventConsumer } from './repository.js';
import type { Logger } from '../shared/logger.js';
import type { EventEnvelope } from './envelope.js';
import type { EventPublisher, OutboxCollection } from './publisher.js';
import type { FlowProducer } from 'bullmq';
import type { Db } from 'mongodb';

/**
 * Moves recorded events from the outbox of their documents to the `events` collection (their durable
 * home), hands them to the event queues when Redis answers, and clears the outbox. Used by the API
 * right after a write (so delivery is normally immediate) and by the relay for whatever is left. The
 * move does not depend on Redis: while it is away, events wait in `events` marked `unqueued`.
 */
const FAST_PATH_TIMEOUT_MS = 2_000;
/**
 * Under load, how long events wait to share one move (record in `events`, publish, clear the outbox)
 * with those of other writes: at 1,000 writes/s, 25 writes per move, so its two MongoDB round trips
 * cost 0.08 per write. An event after a quiet moment leaves at once; none waits longer than this.
 */
export const OUTBOX_MOVE_INTERVAL_MS = 25;
/**
 * After this long, a web process's move that recorded events but has not queued their batch has
 * failed (its fast path gives up after FAST_PATH_TIMEOUT_MS): the relay publishes those events.
 */
export const MOVE_ABANDONED_MS = 30_000;

type Recorded = { collection: OutboxCollection; documentId: string; events: EventEnvelope[] };

/** An event and the consumers still to run it (all of them for a new event). */
export interface QueuedEvent {
  event: EventEnvelope;
  consumers: readonly EventConsumer[];
}

export class QueueEventPublisher implements EventPublisher {
  private readonly producer: FlowProducer;
  readonly eventStore: EventsRepository;
  /**
   * Writes arriving together share one move, one publish and one clearing write per collection; under
   * load a move starts at most every OUTBOX_MOVE_INTERVAL_MS, so its round trips are shared by all
   * the writes of that moment.
   */
  private readonly recorded = new Coalescer<Recorded>((batch) => this.publishBatch(batch), {
    minIntervalMs: OUTBOX_MOVE_INTERVAL_MS,
  });

  constructor(
    db: Db,
    private readonly settings: QueueSettings,
    private readonly logger: Logger,
    options: { eventStore?: EventsRepository; retentionDays?: number } = {},
  ) {
    this.eventStore = options.eventStore ?? new EventsRepository(db, options.retentionDays);
    this.db = db;
    this.producer = createEventProducer(settings);
    this.producer.on('error', () => {}); // outages are expected; the relay retries
  }

  private readonly db: Db;

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
   * Moves the events of many documents to `events`, publishes them (one round trip for all queues)
   * and clears them from their documents. Returns whether the queues took them; when not, they wait
   * in `events` for the relay. Throws only when MongoDB failed (the outbox then still holds them).
   * `batch`: the web process's own move, whose events no one else has published, goes out as one
   * batch job per queue; otherwise (the relay's, which may find events a move already published)
   * each event goes out as a copy its consumers check first.
   */
  async publishAndClear(
    collection: OutboxCollection,
    documents: Array<{ documentId: string; companyId?: string; events: EventEnvelope[] }>,
    options: { batch?: boolean } = {},
  ): Promise<boolean> {
    const events = documents.flatMap((document) => document.events);
    return inPublishSpan(events, () => this.moveAndQueue(collection, documents, events, options.batch ?? false));
  }

  private async moveAndQueue(
    collection: OutboxCollection,
    documents: Array<{ documentId: string; companyId?: string; events: EventEnvelope[] }>,
    events: EventEnvelope[],
    batch: boolean,
  ): Promise<boolean> {
    const connected = this.isConnected();
    const batches = batch ? planEventBatches(events, (event) => eventBytes([event])) : [];
    const publishJobs = new Map(
      batches.flatMap(({ jobId, events: carried }) => carried.map((event) => [event.event_id, jobId])),
    );
    const recordedBefore = await this.eventStore.record(events, { queued: connected, publishJobs });
    // Whoever recorded an event first publishes it: a web process's move leaves the others to the relay
    // that recorded them (in the outbox until it does); the relay works out its share below.
    const isOwn = (event: EventEnvelope) => !recordedBefore.has(event.event_id);
    const own = batch ? events.filter(isOwn) : [];
    const share = batch ? { publish: own, clear: own } : await this.relayShare(events, recordedBefore);
    const toClear = new Set(share.clear.map((event) => event.event_id));
    let queued = connected;
    if (connected && share.publish.length > 0) {
      queued = batch
        ? await this.enqueueBatches(
            batches
              .map((planned) => ({ ...planned, events: planned.events.filter(isOwn) }))
              .filter((planned) => planned.events.length > 0),
          )
        : await this.enqueue(
            share.publish.map((event) => ({ event, consumers: EVENT_CONSUMERS })),
            { republished: true },
          );
    }
    // Not queued: the relay queues them later. Those recorded just now already say so; ones recorded
    // before (by a move that never queued them) are marked, since they leave the outbox now.
    if (!queued) {
      const unmarked = connected ? share.publish : share.publish.filter((event) => recordedBefore.has(event.event_id));
      await this.eventStore.markUnqueued(unmarked);
    }
    await clearPublished(
      this.db.collection(collection),
      documents.flatMap(({ documentId, companyId, events: moved }) => {
        const company = companyId ?? moved[0]?.company_id;
        const cleared = moved.filter((event) => toClear.has(event.event_id));
        return company && cleared.length > 0
          ? [
              {
                documentId,
                companyId: company,
                eventIds: cleared.map((event) => event.event_id),
                bytes: eventBytes(cleared),
              },
            ]
          : [];
      }),
    );
    return queued;
  }

  /**
   * What the relay publishes (as copies) and clears of the events it found in outboxes. Those it
   * recorded first are its own. One a web process's move recorded first (with its batch job): only
   * cleared once that batch is queued; left alone while the move may still queue it (recorded less
   * than MOVE_ABANDONED_MS ago); published and cleared after that (the move failed). One recorded first
   * without a batch (another relay, a capped outbox): published and cleared (BullMQ adds a copy once).
   */
  private async relayShare(
    events: EventEnvelope[],
    recordedBefore: Set<string>,
  ): Promise<{ publish: EventEnvelope[]; clear: EventEnvelope[] }> {
    if (recordedBefore.size === 0) return { publish: events, clear: events };
    const earlier = await this.eventStore.publishJobsOf(events.filter((event) => recordedBefore.has(event.event_id)));
    // Without Redis no batch can be looked up: counted as not queued (a recent one is left alone).
    const batchQueued = new Map<string, boolean>();
    for (const { publish_job: job } of earlier.values())
      if (job && !batchQueued.has(job) && this.isConnected())
        batchQueued.set(job, await jobStillQueued(this.fanoutQueue(), job));
    const abandonedBefore = Date.now() - MOVE_ABANDONED_MS;
    const share = { publish: [] as EventEnvelope[], clear: [] as EventEnvelope[] };
    for (const event of events) {
      const doc = earlier.get(event.event_id);
      const job = doc?.publish_job;
      if (job && batchQueued.get(job)) share.clear.push(event);
      else if (!job || !doc || doc.recorded_at.getTime() < abandonedBefore) {
        share.publish.push(event);
        share.clear.push(event);
      }
    }
    return share;
  }

  private fanout: Queues['hook-fanout'] | undefined;

  /** A handle on the fan-out queue, to look up batches (the relay's only). */
  private fanoutQueue(): Queues['hook-fanout'] {
    this.fanout ??= createQueue('hook-fanout', this.settings);
    return this.fanout;
  }

  /** Adds a move's batches to every event queue; false when Redis did not take them. */
  private async enqueueBatches(batches: PlannedBatch[]): Promise<boolean> {
    if (!this.isConnected()) return false;
    try {
      await publishEventBatches(this.producer, batches);
      return true;
    } catch (error) {
      this.logger.debug({ err: error, batches: batches.length }, 'queues did not take the events');
      return false;
    }
  }

  /** Hands just-recorded events to the next flush, a moment later; never throws, never delays the caller. */
  publishRecorded(collection: OutboxCollection, documentId: string, events: EventEnvelope[]): void {
    void this.recorded.add({ collection, documentId, events });
  }

  private async publishBatch(batch: Recorded[]): Promise<void> {
    await Promise.all(
      [...new Set(batch.map((entry) => entry.collection))].map((collection) => {
        const documents = batch.filter((entry) => entry.collection === collection);
        return withTimeout(this.publishAndClear(collection, documents, { batch: true }), FAST_PATH_TIMEOUT_MS).catch(
          (error) => {
            this.logger.debug({ err: error, documents: documents.length }, 'fast-path move failed; the relay will');
          },
        );
      }),
    );
  }

  /** Resolves once every event handed over so far has been moved (or left to the relay); stays open. */
  settled(): Promise<void> {
    return this.recorded.close();
  }

  async close(): Promise<void> {
    await this.recorded.close(); // each batch is bounded by FAST_PATH_TIMEOUT_MS
    await this.producer.close();
    await this.fanout?.close();
  }
}
