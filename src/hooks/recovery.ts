import { setTimeout as sleep } from 'node:timers/promises';
import { hookDeliveryKey } from './deliveries.repository.js';
import { hookDeliveryJobId } from './fanout.js';
import { disabledState, eventsOf, type HookDoc, type HooksRepository } from './repository.js';
import type { EventEnvelope, EventType } from '../contracts/envelope.js';
import type { DeliveryJob } from '../contracts/jobs.js';
import type { Logger } from '../shared/logger.js';
import type { DeliveriesRepository } from './deliveries.repository.js';
import type { RecoveriesRepository, RecoveryDoc } from './recoveries.repository.js';

/**
 * Recovering a hook (DECISIONS.md section 13.2): every event of the company in a period that the hook takes
 * and that it has not received (a failed delivery, or none at all) is sent again, in sequence order, through
 * the normal machinery: a `deliveries` job each (so the hook's lanes and in-flight limit, the retry schedule
 * and the delivery records apply), at most `window` of them waiting for their attempt at a time (four times
 * the hook's in-flight limit: RECOVERY_WINDOW_PER_IN_FLIGHT), so a
 * recovery of 10,000 events never floods the queue ahead of other companies' work. Its position is kept in
 * MongoDB: a worker that dies mid-way leaves it to another (or itself restarted) once its lease runs out,
 * which carries on from there; what a recovery hands over again after a crash is judged again first, so a
 * delivery that has succeeded (or that this recovery already attempted) is never sent again by it.
 */

/** A recovery keeps at most this many times HOOK_MAX_IN_FLIGHT_PER_HOOK deliveries waiting for their attempt. */
export const RECOVERY_WINDOW_PER_IN_FLIGHT = 4;
/** Events read from the store at a time. */
export const RECOVERY_PAGE = 200;
/** A handed-over delivery not attempted within this long (its job lost until the reconciler adds it again) stops holding its place in the window. */
const OUTSTANDING_MAX_MS = 120_000;

/** The job id of a recovery's delivery of one event: the same whenever the recovery hands it over again. */
export function recoveryJobId(hookId: string, eventId: string, recoveryId: string): string {
  return hookDeliveryJobId(hookId, eventId, `recover-${recoveryId}`);
}

/** The events feature's store, as far as hooks read it: recorded events by id, and a recovery's feed range. */
export interface RecordedEvents {
  recoveryPage(
    companyId: string,
    range: { afterSequence: number; upto: number; since: Date; until: Date; types?: EventType[] },
    limit: number,
  ): Promise<Array<{ _id: string; event: EventEnvelope; sequence?: number }>>;
  /** A readable (sequenced, retained) event. */
  findById(companyId: string, eventId: string): Promise<{ event: EventEnvelope } | null>;
  /** The oldest occurred_at the store still keeps. */
  retainedSince(now?: Date): Date;
}

export interface RecoveryScanDeps {
  hooks: Pick<HooksRepository, 'takes'>;
  events: Pick<RecordedEvents, 'recoveryPage'>;
  deliveries: Pick<DeliveriesRepository, 'recoveryStates'>;
}

export type RecoveryPeriod = Pick<RecoveryDoc, 'since' | 'until' | 'upto_sequence'>;

export interface Candidate {
  event: EventEnvelope;
  sequence: number;
}

/**
 * One page of the period's events after `after`, those the hook still needs: it takes them (types and filter,
 * as the fan-out judges), no attempt of their delivery ever succeeded, and, within a recovery, this recovery
 * has not attempted them already. `last`: the last sequence read; `exhausted` when the period has no more.
 */
export async function recoveryCandidates(
  deps: RecoveryScanDeps,
  hook: HookDoc,
  period: RecoveryPeriod,
  after: number,
  recoveryId?: string,
  limit = RECOVERY_PAGE,
): Promise<{ candidates: Candidate[]; last: number | undefined; exhausted: boolean }> {
  const subscribed = eventsOf(hook);
  const types = subscribed.includes('*') ? undefined : (subscribed as EventType[]);
  const page = await deps.events.recoveryPage(
    hook.company_id,
    { afterSequence: after, upto: period.upto_sequence, since: period.since, until: period.until, types },
    limit,
  );
  const taken: Candidate[] = [];
  for (const doc of page)
    if (doc.sequence !== undefined && (await deps.hooks.takes(hook, doc.event)))
      taken.push({ event: doc.event, sequence: doc.sequence });
  const states = await deps.deliveries.recoveryStates(
    hook.company_id,
    taken.map(({ event }) => hookDeliveryKey(hook._id, event.event_id)),
  );
  const candidates = taken.filter(({ event }) => {
    const state = states.get(hookDeliveryKey(hook._id, event.event_id));
    if (!state) return true; // never attempted
    if (state.succeeded) return false;
    const ours = recoveryId !== undefined && state.jobId === recoveryJobId(hook._id, event.event_id, recoveryId);
    return !(ours && state.attemptsMade > 0);
  });
  return { candidates, last: page.at(-1)?.sequence, exhausted: page.length < limit };
}

/** How many events a recovery of the period would send again now. */
export async function countRecoverable(deps: RecoveryScanDeps, hook: HookDoc, period: RecoveryPeriod): Promise<number> {
  let count = 0;
  let after = 0;
  for (;;) {
    const page = await recoveryCandidates(deps, hook, period, after);
    count += page.candidates.length;
    if (page.exhausted || page.last === undefined) return count;
    after = page.last;
  }
}

export interface RecoveryDriverDeps extends RecoveryScanDeps {
  recoveries: Pick<RecoveriesRepository, 'progress' | 'finish'>;
  hookById(companyId: string, hookId: string): Promise<HookDoc | null>;
  deliveries: Pick<DeliveriesRepository, 'recoveryStates' | 'awaitingRecovery' | 'recordScheduledMany'>;
  /** Adds the delivery jobs (the `deliveries` queue), in this order. */
  enqueue(jobs: Array<{ data: DeliveryJob; jobId: string }>): Promise<void>;
  /** Deliveries of one recovery waiting for their attempt at once. */
  window: number;
  leaseMs: number;
  /** How often the deliveries handed over are looked at while the window is full. */
  pollMs: number;
  holder: string;
  logger: Logger;
}

export type DriveOutcome = 'done' | 'stopped' | 'lost' | 'aborted';

/**
 * Drives one recovery until it has handed over its last event and every one of them has had its attempt
 * (`done`), its hook was deleted or disabled (`stopped`), another process took it over (`lost`), or `signal`
 * asked it to stop (`aborted`: its lease is given back, so another process carries on at once).
 */
export async function driveRecovery(
  recovery: RecoveryDoc,
  deps: RecoveryDriverDeps,
  signal: AbortSignal,
): Promise<DriveOutcome> {
  const { company_id: companyId, _id: hookId, recovery_id: recoveryId } = recovery;
  const log = deps.logger.child({ hook_id: hookId, recovery_id: recoveryId });
  let { position, sent } = recovery;
  let scanned = position;
  let exhausted = false;
  let saved = { position, at: Date.now() };
  const buffer: Candidate[] = [];
  /** Handed-over deliveries still waiting for their attempt, with when they were handed over. */
  const outstanding = new Map<string, number>();
  const finish = async (status: 'done' | 'stopped', reason?: string): Promise<DriveOutcome> => {
    await deps.recoveries.finish(recovery, deps.holder, { status, reason, position, sent });
    log.info({ status, reason, sent }, 'hook recovery finished');
    return status;
  };

  while (!signal.aborted) {
    const hook = await deps.hookById(companyId, hookId);
    if (!hook) return finish('stopped', 'hook deleted');
    if (disabledState(hook, new Date())) return finish('stopped', 'hook disabled');

    if (outstanding.size > 0) {
      const awaiting = await deps.deliveries.awaitingRecovery(companyId, [...outstanding.keys()], recoveryId);
      const stale = Date.now() - OUTSTANDING_MAX_MS;
      for (const [key, handedAt] of outstanding) if (!awaiting.has(key) || handedAt < stale) outstanding.delete(key);
    }

    // What the window has room for, handed over together: one write for their records, one add for their jobs.
    const batch: Candidate[] = [];
    while (outstanding.size + batch.length < deps.window && !signal.aborted) {
      if (buffer.length === 0) {
        if (exhausted) break;
        const page = await recoveryCandidates(deps, hook, recovery, scanned, recoveryId);
        buffer.push(...page.candidates);
        if (page.last !== undefined) scanned = page.last;
        exhausted = page.exhausted;
        if (buffer.length === 0 && batch.length === 0) position = scanned;
        continue;
      }
      batch.push(buffer.shift()!);
    }
    if (batch.length > 0) {
      const handing = batch.map(({ event }) => ({
        key: hookDeliveryKey(hookId, event.event_id),
        jobId: recoveryJobId(hookId, event.event_id, recoveryId),
        data: { event, target: { kind: 'hook', hook_id: hookId } } satisfies DeliveryJob,
      }));
      // Recorded as due first, so Redis losing the jobs leaves them to the reconciler rather than lose them.
      await deps.deliveries.recordScheduledMany(
        handing.map(({ key, jobId, data }) => ({
          key,
          target: { hook_id: hookId, automation_id: null },
          event: data.event,
          job: { ...data, id: jobId },
          recovery: recoveryId,
        })),
      );
      await deps.enqueue(handing.map(({ data, jobId }) => ({ data, jobId })));
      for (const { key } of handing) outstanding.set(key, Date.now());
      sent += batch.length;
      position = buffer.length === 0 ? scanned : batch.at(-1)!.sequence;
    }
    const handed = batch.length;
    if (exhausted && buffer.length === 0 && outstanding.size === 0) return finish('done');

    const now = Date.now();
    if ((position !== saved.position && now - saved.at >= 250) || now - saved.at >= deps.leaseMs / 3) {
      if (!(await deps.recoveries.progress(recovery, deps.holder, { position, sent, leaseMs: deps.leaseMs })))
        return 'lost';
      saved = { position, at: now };
    }
    if (handed === 0) await sleep(deps.pollMs, undefined, { signal }).catch(() => {});
  }
  // Stopping (SIGTERM): the position reached, and the lease given back for another process to carry on.
  await deps.recoveries.progress(recovery, deps.holder, { position, sent, leaseMs: 0 });
  return 'aborted';
}

export interface RecoveryRunnerDeps extends RecoveryDriverDeps {
  recoveries: Pick<RecoveriesRepository, 'progress' | 'finish' | 'claimRunnable'>;
  /** Recoveries one process drives at once. */
  maxConcurrent: number;
  /** How often a process looks for a recovery to drive. */
  claimEveryMs: number;
}

/** The hooks worker's loop: takes runnable recoveries (new, or whose driver died) and drives them. */
export class RecoveryRunner {
  private readonly abort = new AbortController();
  private readonly running = new Set<Promise<unknown>>();
  private loop: Promise<void> | undefined;

  constructor(private readonly deps: RecoveryRunnerDeps) {}

  start(): void {
    this.loop = this.claimLoop();
  }

  private async claimLoop(): Promise<void> {
    const { signal } = this.abort;
    while (!signal.aborted) {
      try {
        while (this.running.size < this.deps.maxConcurrent && !signal.aborted) {
          const recovery = await this.deps.recoveries.claimRunnable(this.deps.holder, this.deps.leaseMs);
          if (!recovery) break;
          const driving = driveRecovery(recovery, this.deps, signal).catch((error: unknown) =>
            // Its lease runs out and a runner (this one, or another) carries on from the saved position.
            this.deps.logger.warn({ err: error, hook_id: recovery._id }, 'hook recovery interrupted'),
          );
          this.running.add(driving);
          void driving.finally(() => this.running.delete(driving));
        }
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'looking for hook recoveries failed; trying again');
      }
      await sleep(this.deps.claimEveryMs, undefined, { signal }).catch(() => {});
    }
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.loop;
    await Promise.all(this.running);
  }
}
