import { randomUUID } from 'node:crypto';
import { planEventBatches, type PlannedBatch } from '../contracts/jobs.js';
import { eventBytes } from '../shared/outbox.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { HistoryRow } from '../contracts/history-rows.js';
import type { Logger } from '../shared/logger.js';
import type { EventDoc, EventsRepository } from './repository.js';
import type { PlannedSequence, SequencePlan, SequencerStore } from './sequencer-store.js';

export const DEFAULT_SEQUENCER_LEASE_MS = 5_000;
/** How often the holder looks for unsequenced events when nobody woke it: bounds the feed's lag. */
const IDLE_POLL_MS = 50;
const BATCH = 500;
const ERROR_BACKOFF_MS = 1_000;

export interface SequencerDeps {
  events: Pick<EventsRepository, 'findUnsequenced' | 'unsequencedAmong' | 'assignSequences' | 'markUnsequencedLegacy'>;
  store: SequencerStore;
  /** Adds batches to the event queues; false when Redis did not take them (the relay queues them later). */
  publish(batches: PlannedBatch[]): Promise<boolean>;
  /** Tells waiting feed readers that these companies have new readable events. */
  announce(companyIds: string[]): void;
  logger: Logger;
  leaseMs?: number;
  /**
   * The record history (docs/items.md, "History"): the rows of a batch's events, written in the batch before
   * its sequences, so an event readable in the feed always has its history row (a replayed plan writes them
   * again, the same rows). Absent: no history.
   */
  history?: {
    rowsOf(events: Array<{ event: EventEnvelope; sequence: number }>): HistoryRow[];
    record(rows: HistoryRow[]): Promise<void>;
  };
}

type Unsequenced = Pick<EventDoc, '_id' | 'event' | 'unqueued'>;

/**
 * The one path by which an event becomes readable (DECISIONS.md section 13.1, docs/events.md "The
 * change feed"). One sequencer is active at a time, holding a lease in MongoDB; every process that
 * records events runs one, and one of them holds the lease. Each batch: take the unsequenced events,
 * reserve each company's range with one `$inc`, record the plan under the lease's epoch, publish the
 * events (with their sequence) to the queues, write the sequences, and only then move each company's
 * readable position to the batch's highest sequence. The next batch starts after that. The feed
 * serves nothing above the readable position, so no event becomes readable below a readable one,
 * whichever process dies when.
 */
export class EventSequencer {
  private readonly holder = randomUUID();
  private readonly leaseMs: number;
  private epoch: number | undefined;
  private renewAt = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private failing = false;

  constructor(private readonly deps: SequencerDeps) {
    this.leaseMs = deps.leaseMs ?? DEFAULT_SEQUENCER_LEASE_MS;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Events were just recorded: look now rather than at the next poll. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Whether this process holds the lease (as far as it knows). */
  get active(): boolean {
    return this.epoch !== undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeUp?.();
    await this.loop;
    if (this.epoch !== undefined) await this.deps.store.release(this.holder, this.epoch).catch(() => {});
    this.epoch = undefined;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let delay = IDLE_POLL_MS;
      try {
        if (await this.holdLease()) {
          this.woken = false;
          if ((await this.sequenceBatch()) >= BATCH) delay = 0;
        } else delay = Math.max(IDLE_POLL_MS, Math.floor(this.leaseMs / 5));
        if (this.failing) this.deps.logger.info('sequencer running again');
        this.failing = false;
      } catch (error) {
        if (!this.failing) this.deps.logger.warn({ err: error }, 'sequencer cannot run yet; events wait unsequenced');
        this.failing = true;
        delay = ERROR_BACKOFF_MS;
      }
      // Woken only matters to the holder: the others just wait for the lease to come free.
      if (delay > 0 && !(this.woken && this.epoch !== undefined) && !this.stopped) await this.sleep(delay);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
    });
  }

  /**
   * Holds the lease: renews it while held, takes it when free. A new holder first applies the plan its
   * predecessor recorded, so the batch it left halfway is finished with the same sequences.
   */
  async holdLease(): Promise<boolean> {
    const { store } = this.deps;
    const now = Date.now();
    if (this.epoch !== undefined) {
      if (now < this.renewAt) return true;
      if (await store.renew(this.holder, this.epoch, this.leaseMs)) {
        this.renewAt = now + this.leaseMs / 3;
        return true;
      }
      this.deps.logger.warn({ epoch: this.epoch }, 'sequencer lease taken over by another process');
      this.epoch = undefined;
    }
    const lease = await store.acquire(this.holder, this.leaseMs);
    if (!lease) return false;
    this.epoch = lease.epoch;
    this.renewAt = now + this.leaseMs / 3;
    this.deps.logger.info({ epoch: lease.epoch, replaying: lease.plan !== null }, 'sequencer lease taken');
    if (lease.plan) await this.apply(lease.plan, await this.deps.events.unsequencedAmong(refsOf(lease.plan)));
    if (!lease.legacyMarked) {
      const marked = await this.deps.events.markUnsequencedLegacy();
      if (marked > 0) this.deps.logger.info({ events: marked }, 'events recorded before sequences queued for one');
      await store.markLegacyDone(lease.epoch);
    }
    return true;
  }

  /** Sequences one batch; returns how many events it took. */
  async sequenceBatch(): Promise<number> {
    const epoch = this.epoch;
    if (epoch === undefined) return 0;
    const docs = await this.deps.events.findUnsequenced(BATCH);
    if (docs.length === 0) return 0;
    const plan = await this.plan(docs);
    // Recorded under our epoch, or not at all: a holder that lost the lease stops before writing.
    if (!(await this.deps.store.recordPlan(epoch, plan))) {
      this.deps.logger.warn({ epoch }, 'sequencer lease lost before its batch; the new holder sequences it');
      this.epoch = undefined;
      return 0;
    }
    await this.apply(plan, docs);
    return docs.length;
  }

  /** Per company, in the order events occurred: one range reserved per company and batch. */
  private async plan(docs: Unsequenced[]): Promise<SequencePlan> {
    const byCompany = new Map<string, Unsequenced[]>();
    for (const doc of docs) {
      const list = byCompany.get(doc.event.company_id);
      if (list) list.push(doc);
      else byCompany.set(doc.event.company_id, [doc]);
    }
    const ranges = await Promise.all(
      [...byCompany].map(async ([companyId, list]) => {
        list.sort(byOccurrence);
        return { companyId, list, last: await this.deps.store.reserve(companyId, list.length) };
      }),
    );
    const events: PlannedSequence[] = [];
    for (const { companyId, list, last } of ranges) {
      let sequence = last - list.length;
      for (const doc of list) events.push({ event_id: doc._id, company_id: companyId, sequence: ++sequence });
    }
    const sequenced = new Map(docs.map((doc) => [doc._id, doc]));
    const toQueue = events
      .filter((planned) => sequenced.get(planned.event_id)?.unqueued)
      .map((planned) => withSequence(sequenced.get(planned.event_id)!.event, planned.sequence));
    const jobs = new Map(
      planEventBatches(toQueue, (event) => eventBytes([event])).flatMap(({ jobId, events: carried }) =>
        carried.map((event) => [event.event_id, jobId] as const),
      ),
    );
    return {
      events: events.map((planned) => {
        const job = jobs.get(planned.event_id);
        return job ? { ...planned, publish_job: job } : planned;
      }),
      readable: ranges.map(({ companyId, last }) => ({ company_id: companyId, sequence: last })),
    };
  }

  /**
   * Publishes, writes and makes readable what the plan says, for the events of it still unsequenced.
   * Applied twice (a takeover while the old holder still runs), every step writes the same values.
   */
  private async apply(plan: SequencePlan, unsequenced: Unsequenced[]): Promise<void> {
    const docs = new Map(unsequenced.map((doc) => [doc._id, doc]));
    const batches = new Map<string, EventEnvelope[]>();
    for (const planned of plan.events) {
      const doc = docs.get(planned.event_id);
      if (!doc?.unqueued || !planned.publish_job) continue;
      const batch = batches.get(planned.publish_job);
      const event = withSequence(doc.event, planned.sequence);
      if (batch) batch.push(event);
      else batches.set(planned.publish_job, [event]);
    }
    const queued =
      batches.size === 0 || (await this.deps.publish([...batches].map(([jobId, events]) => ({ jobId, events }))));
    const written = plan.events.filter((planned) => docs.has(planned.event_id));
    const history = this.deps.history;
    if (history)
      await history.record(
        history.rowsOf(
          written.map((planned) => ({ event: docs.get(planned.event_id)!.event, sequence: planned.sequence })),
        ),
      );
    await this.deps.events.assignSequences(
      written.map((planned) => ({
        event: planned,
        sequence: planned.sequence,
        ...(queued && planned.publish_job ? { publishJob: planned.publish_job } : {}),
      })),
      queued,
    );
    await this.deps.store.markReadable(plan.readable);
    this.deps.announce(plan.readable.map((entry) => entry.company_id));
  }
}

function refsOf(plan: SequencePlan) {
  return plan.events.map((planned) => ({ event_id: planned.event_id, company_id: planned.company_id }));
}

function withSequence(event: EventEnvelope, sequence: number): EventEnvelope {
  return { ...event, sequence };
}

function byOccurrence(a: Unsequenced, b: Unsequenced): number {
  const at = a.event.occurred_at.localeCompare(b.event.occurred_at);
  return at !== 0 ? at : a._id < b._id ? -1 : a._id > b._id ? 1 : 0;
}
