import { HOOK_PING, type WebhookEnvelope } from '../contracts/envelope.js';
import {
  HookExistsError,
  HookLimitReachedError,
  InsufficientScopeError,
  NotFoundError,
  RecoveryInProgressError,
  UnauthorizedError,
  UnavailableError,
  ValidationError,
  type FieldProblem,
} from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { toIso } from '../shared/time.js';
import { knownChangeFields } from './change-fields.js';
import { judgeChangeFilter } from './change-filter.js';
import { missingReadScope } from './event-scopes.js';
import { hookDeliveryJobId } from './fanout.js';
import { countRecoverable } from './recovery.js';
import { eventsOf, type HookDoc, type HookEvent, type HookFilter, type HooksRepository } from './repository.js';
import {
  filterOf,
  requestedEvents,
  storedFilter,
  toAttemptResponse,
  toHookResponse,
  type CreateHookBody,
  type CreatedHookResponse,
  type DeliveryAttemptResponse,
  type HookPingResponse,
  type RecoverBody,
  type RecoveryResponse,
  type RotatedSecretResponse,
  type HookFilterBody,
  type UpdateHookBody,
} from './schemas.js';
import { newWebhookSecret, SECRET_ROTATION_OVERLAP_MS } from './signing.js';
import type { Actor, AuthContext } from '../contracts/auth-context.js';
import type { DeliveryJob } from '../contracts/jobs.js';
import type { PipelineDoc } from '../contracts/pipelines.js';
import type { TargetGuard } from '../shared/target-guard.js';
import type { ChangeCondition } from './change-filter.js';
import type { DeliveriesQuery, DeliveriesRepository } from './deliveries.repository.js';
import type { RecoveriesRepository } from './recoveries.repository.js';
import type { RecordedEvents } from './recovery.js';

/** How long runners leave a new recovery to the request that counts it. */
const RECOVERY_COUNT_GRACE_MS = 60_000;

/** How many of a hook's latest attempts the deliveries route shows. */
export const RECENT_ATTEMPTS = 100;

/** What a hook needs of its API key (the auth feature's record): its revocation and expiry. */
export interface KeyValidity {
  revoked_at: Date | null;
  expires_at: Date | null;
}

export interface HooksServiceDeps {
  hooks: HooksRepository;
  deliveries: DeliveriesRepository;
  /** Where a delivered event's envelope is read for a redelivery (its delivery record leaves it out), and a recovery's events. */
  events: RecordedEvents;
  recoveries: RecoveriesRepository;
  /** The company's readable feed position: a recovery covers the events up to it. */
  readablePosition(companyId: string): Promise<number>;
  guard: TargetGuard;
  /** Whether a pipeline of the company exists (a filter may name only those). */
  pipelineExists(companyId: string, pipelineId: string): Promise<boolean>;
  /** The company's pipelines: their custom fields are what `filter.changes` may name besides core fields. */
  pipelines: {
    findCached(companyId: string, pipelineId: string): Promise<PipelineDoc | null>;
    list(companyId: string): Promise<PipelineDoc[]>;
  };
  /** HOOK_MAX_PER_COMPANY. */
  maxHooksPerCompany: number;
  /** The API key a subscribe acts with, as stored now (its revocation and expiry). */
  apiKey(companyId: string, keyId: string): Promise<KeyValidity | null>;
  enqueueDelivery(data: DeliveryJob, jobId: string): Promise<void>;
}

/** REST hook subscriptions (DECISIONS.md section 9); every lookup is scoped to the actor's company. */
export class HooksService {
  constructor(private readonly deps: HooksServiceDeps) {}

  /** The SSRF check of a target URL (DECISIONS.md section 9), as `errors[]` entries. */
  async targetProblems(targetUrl: string): Promise<FieldProblem[]> {
    const problem = await this.deps.guard.problemWithUrl(targetUrl);
    return problem ? [{ path: 'target_url', message: problem }] : [];
  }

  /**
   * What a well-formed subscription may still get wrong: an internal target, a pipeline not of this company,
   * a key not of it, a `filter.changes` naming a field the subscribed types do not report or a value it
   * cannot hold (judged against `events`, when known).
   */
  async referenceProblems(
    companyId: string,
    body: { target_url?: string; filter?: HookFilterBody; events?: readonly HookEvent[]; event?: HookEvent },
  ): Promise<FieldProblem[]> {
    const pipelineId = body.filter?.pipeline_id;
    const pipelineProblem = async (): Promise<FieldProblem[]> =>
      pipelineId !== undefined && !(await this.deps.pipelineExists(companyId, pipelineId))
        ? [{ path: 'filter.pipeline_id', message: 'is not a pipeline of this company' }]
        : [];
    const actorProblems = async (): Promise<FieldProblem[]> => {
      const keys = body.filter?.exclude_actors ?? [];
      const known = await Promise.all(keys.map(async (keyId) => (await this.deps.apiKey(companyId, keyId)) !== null));
      return keys.flatMap((keyId, index) =>
        known[index] ? [] : [{ path: `filter.exclude_actors.${index}`, message: 'is not an API key of this company' }],
      );
    };
    const events = body.events ?? (body.event ? [body.event] : undefined);
    const changeProblems = async (): Promise<FieldProblem[]> =>
      body.filter && events ? (await this.changeConditions(companyId, body.filter, events)).problems : [];
    const [target, pipeline, actors, changes] = await Promise.all([
      body.target_url === undefined ? [] : this.targetProblems(body.target_url),
      pipelineProblem(),
      actorProblems(),
      changeProblems(),
    ]);
    return [...target, ...pipeline, ...actors, ...changes];
  }

  /**
   * A filter's `changes` judged against the fields the hook's types report: task fields, item fields and the
   * custom fields of the filter's pipeline, or of every pipeline of the company when it names none.
   */
  private async changeConditions(
    companyId: string,
    filter: HookFilterBody,
    events: readonly HookEvent[],
  ): Promise<{ conditions?: ChangeCondition[]; problems: FieldProblem[] }> {
    if (!filter.changes) return { problems: [] };
    const pipelines = filter.pipeline_id
      ? [await this.deps.pipelines.findCached(companyId, filter.pipeline_id)].flatMap((found) => found ?? [])
      : await this.deps.pipelines.list(companyId);
    return judgeChangeFilter(filter.changes, knownChangeFields(events, pipelines), events);
  }

  /** The filter to store: its `changes` judged (and their values normalised); 400 when they do not hold. */
  private async filterToStore(
    companyId: string,
    filter: HookFilterBody,
    events: readonly HookEvent[],
  ): Promise<HookFilter> {
    const { conditions, problems } = await this.changeConditions(companyId, filter, events);
    ValidationError.throwIfAny(problems);
    return storedFilter(filter, conditions);
  }

  /**
   * Creates the subscription and shows its secret, this once. The same target and event types again
   * answer 409 hook_exists with that hook's id (re-enabled if it was disabled for failing), never its secret.
   *
   * The key needs the read scope of every subscribed type (section 13.4), and the hook records it: revoking
   * the key disables the hook, and so does its expiry. A revocation that lands while the hook is being stored
   * is caught by reading the key again after the insert (the revocation then either sees the hook or is seen).
   * The per-company cap is exact under concurrency (see HooksRepository.subscribe).
   */
  async subscribe(
    auth: Pick<AuthContext, 'companyId' | 'keyId' | 'scopes'>,
    body: CreateHookBody,
  ): Promise<CreatedHookResponse> {
    const companyId = auth.companyId;
    const events = requestedEvents(body);
    const missing = missingReadScope(events, auth.scopes);
    if (missing) throw new InsufficientScopeError(missing);
    ValidationError.throwIfAny(await this.referenceProblems(companyId, body));
    const key = await this.usableKey(companyId, auth.keyId);
    const max = this.deps.maxHooksPerCompany;
    const result = await this.deps.hooks.subscribe(
      {
        _id: newId('hook'),
        company_id: companyId,
        target_url: body.target_url,
        event: events[0],
        events,
        filter: body.filter ? await this.filterToStore(companyId, body.filter, events) : null,
        secret: newWebhookSecret(),
        created_at: new Date(),
        created_by_key_id: auth.keyId,
        created_by_key_expires_at: key.expires_at,
        disabled_at: null,
        disabled_reason: null,
        failing_since: null,
      },
      max,
    );
    if ('full' in result) throw new HookLimitReachedError(max);
    if ('existing' in result) return this.exists(result.existing);
    const hook = result.created;
    try {
      await this.usableKey(companyId, auth.keyId);
    } catch (error) {
      await this.deps.hooks.delete(companyId, hook._id);
      throw error;
    }
    const { hook_id, target_url, event, filter, created_at, enabled, disabled_reason, disabled_at } =
      toHookResponse(hook);
    return {
      hook_id,
      target_url,
      event,
      events,
      filter,
      secret: hook.secret,
      created_at,
      enabled,
      disabled_reason,
      disabled_at,
    };
  }

  /** The acting key, unless it was revoked since its request was authenticated (the check may be cached). */
  private async usableKey(companyId: string, keyId: string): Promise<KeyValidity> {
    const key = await this.deps.apiKey(companyId, keyId);
    if (!key || key.revoked_at) throw new UnauthorizedError('The API key has been revoked');
    return key;
  }

  private async exists(hook: HookDoc): Promise<never> {
    // Subscribing again re-enables (section 9), unless the hook's key was revoked (reenable leaves that one).
    if (hook.disabled_at) await this.deps.hooks.reenable(hook.company_id, hook._id);
    throw new HookExistsError(hook._id);
  }

  /**
   * PATCH /v1/ext/hooks/{hook_id} (DECISIONS.md 13.2): target and filter judged as at subscribe, new types
   * need their read scopes (13.4); the secret, the key that created the hook and its deliveries stay.
   */
  async update(
    auth: Pick<AuthContext, 'companyId' | 'scopes'>,
    hookId: string,
    body: UpdateHookBody,
  ): Promise<HookDoc> {
    const companyId = auth.companyId;
    const current = await this.get(companyId, hookId);
    if (body.events) {
      const missing = missingReadScope(body.events, auth.scopes);
      if (missing) throw new InsufficientScopeError(missing);
    }
    // The filter as it will be, judged against the types as they will be (either may change alone).
    const events = body.events ?? eventsOf(current);
    const filter = body.filter === undefined ? (current.filter ? filterOf(current.filter) : null) : body.filter;
    ValidationError.throwIfAny(
      await this.referenceProblems(companyId, {
        target_url: body.target_url,
        filter: body.filter ?? undefined,
        ...(body.filter !== undefined || body.events !== undefined ? { events } : {}),
      }),
    );
    if (body.filter === undefined && body.events !== undefined && filter?.changes)
      ValidationError.throwIfAny((await this.changeConditions(companyId, filter, events)).problems);
    if (body.enabled === true && current.disabled_reason === 'key_revoked')
      throw ValidationError.single(
        'enabled',
        'the API key that created this hook was revoked or expired: subscribe again with a valid key',
      );
    const updated = await this.deps.hooks.update(companyId, hookId, {
      ...(body.target_url !== undefined ? { target_url: body.target_url } : {}),
      ...(body.events !== undefined ? { events: body.events } : {}),
      ...(body.filter !== undefined
        ? { filter: body.filter ? await this.filterToStore(companyId, body.filter, events) : null }
        : {}),
      ...(body.enabled !== undefined ? { enabled: body.enabled } : {}),
    });
    if (!updated) throw new NotFoundError('Hook');
    if ('existing' in updated) throw new HookExistsError(updated.existing._id);
    return updated;
  }

  /** A page of the company's hooks in creation order. */
  list(actor: Actor, afterId: string | undefined, limit: number): Promise<HookDoc[]> {
    return this.listOf(actor.companyId, afterId, limit);
  }

  /** The same for the admin API, which names the company in its path. */
  listOf(companyId: string, afterId: string | undefined, limit: number): Promise<HookDoc[]> {
    return this.deps.hooks.list(companyId, afterId, limit);
  }

  async unsubscribe(actor: Actor, hookId: string): Promise<void> {
    await this.remove(actor.companyId, hookId);
  }

  /** One hook of the company (the admin API's view; also of a disabled one). */
  async get(companyId: string, hookId: string): Promise<HookDoc> {
    const hook = await this.deps.hooks.findById(companyId, hookId);
    if (!hook) throw new NotFoundError('Hook');
    return hook;
  }

  /** Deletes the hook and its delivery records; 404 when the company has no such hook. */
  async remove(companyId: string, hookId: string): Promise<void> {
    if (!(await this.deps.hooks.delete(companyId, hookId))) throw new NotFoundError('Hook');
    await this.deps.deliveries.deleteForHook(companyId, hookId);
    await this.deps.recoveries.deleteForHook(companyId, hookId);
  }

  async recentAttempts(actor: Actor, hookId: string, query: DeliveriesQuery = {}): Promise<DeliveryAttemptResponse[]> {
    await this.find(actor, hookId);
    return (await this.deps.deliveries.recentAttempts(actor.companyId, hookId, RECENT_ATTEMPTS, query)).map(
      toAttemptResponse,
    );
  }

  /**
   * A new signing secret, shown this once; the current one keeps signing next to it for 24 h. A
   * secret kept from an earlier rotation stops at once, so at most two sign at any time.
   */
  async rotateSecret(actor: Actor, hookId: string): Promise<RotatedSecretResponse> {
    const expiresAt = new Date(Date.now() + SECRET_ROTATION_OVERLAP_MS);
    const hook = await this.deps.hooks.rotateSecret(actor.companyId, hookId, newWebhookSecret(), expiresAt);
    if (!hook) throw new NotFoundError('Hook');
    return { hook_id: hook._id, secret: hook.secret, previous_secret_expires_at: expiresAt.toISOString() };
  }

  /**
   * Sends a `hook.ping` event (`data: { hook_id }`) to the hook through the normal signed delivery;
   * it is listed with the hook's deliveries. Like a redelivery, it re-enables a disabled hook.
   */
  async ping(actor: Actor, hookId: string): Promise<HookPingResponse> {
    const hook = await this.find(actor, hookId);
    const event: WebhookEnvelope = {
      event_id: newId('event'),
      type: HOOK_PING,
      company_id: actor.companyId,
      occurred_at: new Date().toISOString(),
      actor: actor.cause,
      data: { hook_id: hookId },
    };
    if (hook.disabled_at) await this.deps.hooks.reenable(actor.companyId, hookId);
    await this.enqueue({ event, target: { kind: 'hook', hook_id: hookId } }, hookDeliveryJobId(hookId, event.event_id));
    return { hook_id: hookId, event_id: event.event_id, status: 'queued' };
  }

  /** Sends a recorded event to the hook again (same webhook-id) and re-enables a disabled hook. */
  async redeliver(
    actor: Actor,
    hookId: string,
    eventId: string,
  ): Promise<{ hook_id: string; event_id: string; status: 'queued' }> {
    const hook = await this.find(actor, hookId);
    const delivery = await this.deps.deliveries.findHookDelivery(actor.companyId, hookId, eventId);
    if (!delivery) throw new NotFoundError('Delivery');
    // A delivered event: from the events store, for as long as it keeps events (EVENTS_RETENTION_DAYS).
    const event = delivery.event ?? (await this.deps.events.findById(actor.companyId, eventId))?.event;
    if (!event) throw new NotFoundError('Delivery');
    if (hook.disabled_at) await this.deps.hooks.reenable(actor.companyId, hookId);
    await this.enqueue(
      { event, target: { kind: 'hook', hook_id: hookId } },
      hookDeliveryJobId(hookId, eventId, `redeliver-${Date.now()}`),
    );
    return { hook_id: hookId, event_id: eventId, status: 'queued' };
  }

  /**
   * POST /v1/ext/hooks/{hook_id}/recover (DECISIONS.md 13.2): counts the events of the period the hook takes
   * whose delivery has not succeeded, and leaves them to the hooks workers' recovery runner (recovery.ts),
   * which sends them in sequence order through the normal machinery. One recovery per hook at a time (409).
   * Like a redelivery, it re-enables a hook that was disabled (not one whose key was revoked: 400).
   */
  async recover(actor: Actor, hookId: string, body: RecoverBody, now = new Date()): Promise<RecoveryResponse> {
    const companyId = actor.companyId;
    const hook = await this.find(actor, hookId);
    const retainedSince = this.deps.events.retainedSince(now);
    const until = body.until && body.until.getTime() < now.getTime() ? body.until : now;
    const problems: FieldProblem[] = [];
    if (body.since.getTime() < retainedSince.getTime())
      problems.push({
        path: 'since',
        message: `is before the events kept (EVENTS_RETENTION_DAYS): the earliest is ${retainedSince.toISOString()}`,
      });
    else if (body.since.getTime() >= until.getTime()) problems.push({ path: 'since', message: 'is not in the past' });
    if (hook.disabled_reason === 'key_revoked')
      problems.push({
        path: 'hook_id',
        message: 'the API key that created this hook was revoked or expired: subscribe again with a valid key',
      });
    ValidationError.throwIfAny(problems);

    const period = { since: body.since, until, upto_sequence: await this.deps.readablePosition(companyId) };
    const recoveryId = newId('recovery');
    // Runners leave it alone while it is counted; should this request die, they start it after the grace.
    const started = await this.deps.recoveries.start(
      hookId,
      { company_id: companyId, recovery_id: recoveryId, ...period },
      new Date(now.getTime() + RECOVERY_COUNT_GRACE_MS),
    );
    if (!started) {
      const running = await this.deps.recoveries.findByHook(companyId, hookId);
      throw new RecoveryInProgressError(hookId, {
        since: toIso(running?.since ?? body.since),
        until: toIso(running?.until ?? until),
      });
    }
    if (hook.disabled_at) await this.deps.hooks.reenable(companyId, hookId);
    const queued = await countRecoverable(this.deps, hook, period);
    await this.deps.recoveries.counted(companyId, hookId, recoveryId, queued);
    return { hook_id: hookId, since: toIso(period.since), until: toIso(period.until), queued };
  }

  private async enqueue(job: DeliveryJob, jobId: string): Promise<void> {
    try {
      await this.deps.enqueueDelivery(job, jobId);
    } catch {
      throw new UnavailableError('The delivery queue is unreachable; retry shortly');
    }
  }

  private find(actor: Actor, hookId: string): Promise<HookDoc> {
    return this.get(actor.companyId, hookId);
  }
}
