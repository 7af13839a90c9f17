import { NotFoundError, UnavailableError, ValidationError, type FieldProblem } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { hookDeliveryJobId } from './fanout.js';
import {
  toAttemptResponse,
  toHookResponse,
  type CreateHookBody,
  type CreatedHookResponse,
  type DeliveryAttemptResponse,
} from './schemas.js';
import { newWebhookSecret } from './signing.js';
import type { AuthContext } from '../auth/authenticator.js';
import type { DeliveryJob } from '../shared/queues.js';
import type { DeliveriesRepository } from './deliveries.repository.js';
import type { HookDoc, HooksRepository } from './repository.js';
import type { TargetGuard } from './target-guard.js';

/** How many of a hook's latest attempts the deliveries route shows. */
export const RECENT_ATTEMPTS = 100;

export interface HooksServiceDeps {
  hooks: HooksRepository;
  deliveries: DeliveriesRepository;
  guard: TargetGuard;
  enqueueDelivery(data: DeliveryJob, jobId: string): Promise<void>;
}

type Caller = Pick<AuthContext, 'companyId'>;

/** REST hook subscriptions (DECISIONS.md section 9); every lookup is scoped to the caller's company. */
export class HooksService {
  constructor(private readonly deps: HooksServiceDeps) {}

  /** The SSRF check of a target URL (DECISIONS.md section 9), as `errors[]` entries. */
  async targetProblems(targetUrl: string): Promise<FieldProblem[]> {
    const problem = await this.deps.guard.problemWithUrl(targetUrl);
    return problem ? [{ path: 'target_url', message: problem }] : [];
  }

  /** Subscribing again to the same target and event returns that hook (same id and secret), re-enabled. */
  async subscribe(caller: Caller, body: CreateHookBody): Promise<CreatedHookResponse> {
    ValidationError.throwIfAny(await this.targetProblems(body.target_url));
    const hook = await this.deps.hooks.subscribe({
      _id: newId('hook'),
      company_id: caller.companyId,
      target_url: body.target_url,
      event: body.event,
      secret: newWebhookSecret(),
      created_at: new Date(),
      disabled_at: null,
      failing_since: null,
    });
    const { hook_id, target_url, event, created_at, disabled_at } = toHookResponse(hook);
    return { hook_id, target_url, event, secret: hook.secret, created_at, disabled_at };
  }

  async unsubscribe(caller: Caller, hookId: string): Promise<void> {
    if (!(await this.deps.hooks.delete(caller.companyId, hookId))) throw new NotFoundError('Hook');
    await this.deps.deliveries.deleteForHook(caller.companyId, hookId);
  }

  async recentAttempts(caller: Caller, hookId: string): Promise<DeliveryAttemptResponse[]> {
    await this.find(caller, hookId);
    return (await this.deps.deliveries.recentAttempts(caller.companyId, hookId, RECENT_ATTEMPTS)).map(
      toAttemptResponse,
    );
  }

  /** Sends a recorded event to the hook again (same webhook-id) and re-enables a disabled hook. */
  async redeliver(
    caller: Caller,
    hookId: string,
    eventId: string,
  ): Promise<{ hook_id: string; event_id: string; status: 'queued' }> {
    const hook = await this.find(caller, hookId);
    const event = await this.deps.deliveries.findHookEvent(caller.companyId, hookId, eventId);
    if (!event) throw new NotFoundError('Delivery');
    if (hook.disabled_at) await this.deps.hooks.reenable(caller.companyId, hookId);
    try {
      await this.deps.enqueueDelivery(
        { event, target: { kind: 'hook', hook_id: hookId } },
        hookDeliveryJobId(hookId, eventId, `redeliver-${Date.now()}`),
      );
    } catch {
      throw new UnavailableError('The delivery queue is unreachable; retry shortly');
    }
    return { hook_id: hookId, event_id: eventId, status: 'queued' };
  }

  private async find(caller: Caller, hookId: string): Promise<HookDoc> {
    const hook = await this.deps.hooks.findById(caller.companyId, hookId);
    if (!hook) throw new NotFoundError('Hook');
    return hook;
  }
}
