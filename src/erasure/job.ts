import { ERASURE_STEPS, type ErasureStores, type ErasureTarget } from './collections.js';
import { eraseQueuedCopies, type QueuedCopies } from './queued-copies.js';
import type { Logger } from '../shared/logger.js';
import type { Queues } from '../shared/queues.js';
import type { ErasuresRepository } from './repository.js';

export interface ErasureJobDeps {
  repos: ErasureStores & { erasures: Pick<ErasuresRepository, 'start' | 'findById' | 'stepDone' | 'complete'> };
  /** The queues whose kept jobs hold copies of events (queued-copies.ts). */
  queues: QueuedCopies;
  logger: Logger;
  /**
   * The most the second pass waits for the sequencer (docs/erasure.md); the first ERASURE_GRACE_MS of it (or all
   * of it when shorter) always: an event moved out of an outbox just before the record was erased lands within that.
   */
  settleMs: number;
  /** Tests only: called after each step, so a test can make a run die halfway. */
  afterStep?: (collection: string) => void | Promise<void>;
}

export type ErasureOutcome = 'completed' | 'already completed' | 'unknown';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Longer than a web process's move of its outbox may take (queue-publisher.ts FAST_PATH_TIMEOUT_MS, 2 s). */
export const ERASURE_GRACE_MS = 2_500;

/** Waits (up to `ms`) until no event about the record waits for the sequencer, which would write its history. */
async function settle(events: Pick<ErasureStores['events'], 'unsequencedAbout'>, target: ErasureTarget, ms: number) {
  const deadline = Date.now() + ms;
  if (ms > 0) await sleep(Math.min(ms, ERASURE_GRACE_MS));
  while (Date.now() < deadline && (await events.unsequencedAbout(target.companyId, target.recordId))) await sleep(100);
}

/**
 * The erasure job (docs/erasure.md): every step of ERASURE_STEPS and the copies in Redis's kept jobs, then, once whatever was in flight has landed,
 * the same steps again. Each step is idempotent, so a run that died halfway is finished by the next (BullMQ runs a
 * stalled or failed job again); the run that completes it is the only one that reports `completed`.
 */
export async function runErasure(deps: ErasureJobDeps, companyId: string, erasureId: string): Promise<ErasureOutcome> {
  const { repos, logger } = deps;
  const erasure = await repos.erasures.start(companyId, erasureId);
  if (!erasure) return (await repos.erasures.findById(companyId, erasureId)) ? 'already completed' : 'unknown';
  const target: ErasureTarget = {
    companyId,
    kind: erasure.kind,
    recordId: erasure.record_id,
    eventIds: await repos.events.idsAbout(companyId, erasure.record_id),
  };
  for (const step of ERASURE_STEPS) {
    await step.erase(repos, target);
    await repos.erasures.stepDone(companyId, erasureId, step.collection);
    await deps.afterStep?.(step.collection);
  }
  await eraseQueuedCopies(repos, deps.queues, target);
  // Second pass: events recorded or sequenced meanwhile (their history rows too).
  await settle(repos.events, target, deps.settleMs);
  target.eventIds = await repos.events.idsAbout(companyId, erasure.record_id);
  for (const step of ERASURE_STEPS) await step.erase(repos, target);
  await eraseQueuedCopies(repos, deps.queues, target);
  const completed = await repos.erasures.complete(companyId, erasureId);
  if (completed) logger.info({ erasure_id: erasureId, company_id: companyId, kind: erasure.kind }, 'erasure completed');
  return completed ? 'completed' : 'already completed';
}

/** How old an unfinished erasure must be before the sweep queues it again. */
export const ERASURE_SWEEP_AGE_MS = 60_000;

/**
 * Queues again the erasures MongoDB says are unfinished and older than ERASURE_SWEEP_AGE_MS (a job lost with Redis,
 * or one the request could not queue); a job id BullMQ still holds (waiting, running, kept as done) is not added again.
 */
export async function requeueUnfinishedErasures(
  erasures: Pick<ErasuresRepository, 'unfinished'>,
  queue: Pick<Queues['erasures'], 'add'>,
): Promise<void> {
  const stale = await erasures.unfinished(new Date(Date.now() - ERASURE_SWEEP_AGE_MS), 100);
  for (const erasure of stale) {
    const data = { erasure_id: erasure._id, company_id: erasure.company_id };
    await queue.add('erasure', data, { jobId: erasure._id });
  }
}
