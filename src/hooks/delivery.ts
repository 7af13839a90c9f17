import { hookDeliveryKey, type DeliveriesRepository, type DeliveryTarget } from './deliveries.repository.js';
import { decideAfterAttempt, disableThreshold, type DeliveryDecision, type RetryPolicy } from './delivery-policy.js';
import { hookDisabledEvent } from './hook-events.js';
import { disabledState, type HookDoc, type HooksRepository } from './repository.js';
import { signedHeaders, signingSecrets, webhookBody } from './signing.js';
import type { DeliveryJob } from '../contracts/jobs.js';
import type { Logger } from '../shared/logger.js';
import type { DeliveryError, SendResult, WebhookRequest } from './sender.js';
import type { WebhookSecretsRepository } from './webhook-secrets.repository.js';

export interface DeliveryDeps {
  hooks: HooksRepository;
  /** The repository itself, or a recorder that batches attempts (the hooks worker's). */
  deliveries: Pick<DeliveriesRepository, 'recordAttempt' | 'deleteForHook'>;
  secrets: WebhookSecretsRepository;
  send(webhook: WebhookRequest): Promise<SendResult>;
  retry: RetryPolicy;
  logger: Logger;
  now?: () => Date;
  random?: () => number;
}

/** What the queue wiring does next: nothing, or try again after `delayMs`. */
export type DeliveryOutcome =
  | { outcome: 'delivered' }
  | { outcome: 'retry'; delayMs: number }
  | { outcome: 'gave_up'; reason: string }
  | { outcome: 'skipped'; reason: string };

function outcomeOf(decision: DeliveryDecision): DeliveryOutcome {
  switch (decision.next) {
    case 'delivered':
      return { outcome: 'delivered' };
    case 'retry':
      return { outcome: 'retry', delayMs: decision.delayMs };
    case 'give_up':
      return { outcome: 'gave_up', reason: decision.reason };
    case 'delete_hook':
      return { outcome: 'gave_up', reason: 'gone' };
  }
}

interface Target {
  url: string;
  /** Several during a hook's secret rotation: one signature each. */
  secret: string | string[];
  /** Id of the delivery record the attempt is added to. */
  key: string;
  /** The hook has failed since its last success (so a success must reset that). */
  failing: boolean;
  owner: DeliveryTarget;
  /** The hook as read for this attempt: what its hook.disabled event shows should this failure disable it. */
  hook?: HookDoc;
}

/** Where a delivery goes; `hook` is the hook as the fan-out just read it, which saves reading it again. */
export interface DeliveryContext {
  jobId: string;
  attempt: number;
  hook?: HookDoc;
  /**
   * Called once the receiver has answered (or the request failed), before the attempt is recorded:
   * frees the hook's in-flight permit (lanes.ts), which limits requests at the receiver, not our
   * bookkeeping after them. `delivered`: a 2xx.
   */
  answered?: (delivered: boolean) => void;
  /**
   * Takes the attempt's record write instead of waiting for it here: the fan-out's progress waits for it with
   * the event's own record (ConsumerProgress). Without, the delivery waits for its record itself.
   */
  alongside?: (write: Promise<void>) => void;
}

async function resolveTarget(job: DeliveryJob, context: DeliveryContext, deps: DeliveryDeps): Promise<Target | string> {
  const { event, target } = job;
  if (target.kind === 'automation') {
    // Automation webhooks are signed with the company's webhook secret (see webhook-secrets.repository.ts).
    const secret = await deps.secrets.forCompany(event.company_id);
    return {
      url: target.url,
      secret,
      key: context.jobId,
      failing: false,
      owner: { hook_id: null, automation_id: target.automation_id },
    };
  }
  const hook = context.hook ?? (await deps.hooks.findById(event.company_id, target.hook_id));
  if (!hook) return 'hook deleted';
  if (disabledState(hook, deps.now?.() ?? new Date())) return 'hook disabled';
  return {
    url: hook.target_url,
    secret: signingSecrets(hook, deps.now?.() ?? new Date()),
    key: hookDeliveryKey(hook._id, event.event_id),
    failing: hook.failing_since !== null,
    owner: { hook_id: hook._id, automation_id: null },
    hook,
  };
}

/**
 * One attempt to deliver one event to one target (DECISIONS.md section 9): sign, POST, record the
 * attempt, and carry out what delivery-policy.ts decides follows (retry, give up, disable or delete the hook).
 * Idempotent enough for at-least-once jobs: a re-run sends again under the same `webhook-id`.
 */
export async function deliverWebhook(
  job: DeliveryJob,
  context: DeliveryContext,
  deps: DeliveryDeps,
): Promise<DeliveryOutcome> {
  const now = deps.now ?? (() => new Date());
  const { event } = job;
  const target = await resolveTarget(job, context, deps);
  // Fields of this attempt's log lines (built per line rather than as a child logger per delivery).
  const about = {
    event_id: event.event_id,
    attempt: context.attempt,
    ...(typeof target === 'string' ? {} : target.owner),
  };
  const log = deps.logger;
  if (typeof target === 'string') {
    log.info({ ...about, outcome: 'skipped', reason: target }, 'webhook not sent');
    return { outcome: 'skipped', reason: target };
  }

  const attemptedAt = now();
  const body = webhookBody(event);
  const result = await deps.send({
    url: target.url,
    headers: signedHeaders(target.secret, event.event_id, body, attemptedAt),
    body,
  });
  // The answer's time as the attempt measured it, not as this process resumed after it: the next attempt's
  // time (next_retry_at) counts the policy's delay from the answer, however busy the event loop was meanwhile.
  const answeredAt = new Date(attemptedAt.getTime() + result.durationMs);
  const statusCode = result.kind === 'response' ? result.statusCode : null;
  const succeeded = statusCode !== null && statusCode >= 200 && statusCode < 300;
  context.answered?.(succeeded);
  const hookId = target.owner.hook_id;

  // A hook's failure is recorded first: its conditional write is what tells whether the hook has now been
  // failing long enough to be disabled (several workers may be failing it at once).
  const failedHook = succeeded || statusCode === 410 ? undefined : target.hook;
  const hookDisabled =
    failedHook !== undefined &&
    (await deps.hooks.recordFailure(
      event.company_id,
      failedHook._id,
      attemptedAt,
      disableThreshold(attemptedAt),
      hookDisabledEvent(failedHook, attemptedAt),
    ));
  const decided = decideAfterAttempt(
    result.kind === 'response' ? result : { statusCode: null },
    { target: hookId ? 'hook' : 'automation', attempt: context.attempt, hookDisabled, answeredAt },
    deps.retry,
    deps.random,
  );
  if (decided.next === 'delete_hook' && hookId) {
    // The receiver unsubscribed: the hook and its history go; nothing more is sent to it.
    await deps.hooks.delete(event.company_id, hookId);
    await deps.deliveries.deleteForHook(event.company_id, hookId);
    log.info(
      { ...about, outcome: 'hook_deleted', status_code: 410, duration_ms: result.durationMs },
      'receiver answered 410 Gone; hook deleted',
    );
    return { outcome: 'gave_up', reason: 'gone' };
  }
  // Only a hook that was failing has anything to reset; the common case costs no write.
  if (decided.next === 'delivered' && hookId && target.failing)
    await deps.hooks.recordSuccess(event.company_id, hookId);
  const decision = outcomeOf(decided);

  const error: DeliveryError | null = result.kind === 'error' ? result.error : succeeded ? null : 'http_status';
  const recorded = deps.deliveries.recordAttempt({
    key: target.key,
    target: target.owner,
    event,
    attempt: {
      attempt: context.attempt,
      status_code: statusCode,
      error,
      duration_ms: result.durationMs,
      succeeded,
      next_retry_at: decision.outcome === 'retry' ? new Date(answeredAt.getTime() + decision.delayMs) : null,
      attempted_at: attemptedAt,
      response_body: result.kind === 'response' ? (result.body ?? '') : null,
    },
    job: { id: context.jobId, target: job.target },
  });
  if (context.alongside) context.alongside(recorded);
  else await recorded;
  const level = succeeded ? 'info' : 'warn';
  if (log.isLevelEnabled(level)) {
    log[level](
      {
        ...about,
        ...decision,
        status_code: statusCode,
        error,
        duration_ms: result.durationMs,
        origin: new URL(target.url).origin,
      },
      succeeded ? 'webhook delivered' : 'webhook attempt failed',
    );
  }
  return decision;
}
