import { randomBytes } from 'node:crypto';
import { hookDeliveryKey } from '../../../src/hooks/deliveries.repository.js';
import { seedResources } from '../../helpers/ext-routes.js';
import { admin, createKey, createTenant, ext, tenantFrom, type Tenant } from '../../helpers/fixtures.js';
import type { EventEnvelope } from '../../../src/contracts/envelope.js';
import type { FastifyInstance } from 'fastify';

/** A tenant whose records the fuzzed routes refer to. */
export interface SeededTenant extends Tenant {
  itemId: string;
  taskId: string;
  hookId: string;
  automationId: string;
  /** An event of the tenant's task, with one failed delivery attempt to the tenant's hook. */
  eventId: string;
}

/**
 * Three companies: `own` is the caller of the external API, `sandbox` is where fuzzed admin calls
 * land (so they cannot revoke the fuzzer's own key), and `foreign` holds records with distinctive
 * names whose ids are thrown at both APIs and must never come back in any response.
 */
export interface FuzzWorld {
  own: SeededTenant;
  sandbox: SeededTenant;
  foreign: SeededTenant;
  /** Every id and distinctive string of the foreign company. */
  foreignMarkers: string[];
}

async function seedTenant(
  app: FastifyInstance,
  tenant: Tenant,
  names: { item?: string; task?: string; automation?: string } = {},
): Promise<SeededTenant> {
  await seedResources(app, tenant);
  if (names.item) {
    await ext(app, tenant.key, 'PATCH', `/items/${tenant.itemId}`, {
      name: names.item,
      contact_id: `${names.item}-contact`,
    });
  }
  if (names.task)
    await ext(app, tenant.key, 'PATCH', `/tasks/${tenant.taskId}`, { title: names.task, notes: `${names.task} notes` });
  const automation = await admin(
    app,
    'POST',
    `/companies/${tenant.companyId}/automations`,
    {
      name: names.automation ?? 'Follow up',
      trigger: 'task.created',
      actions: [{ type: 'create_task', title: names.automation ?? 'Follow up', due_in_minutes: 60 }],
    },
    201,
  );
  // Setup, not a check: the fuzzed app runs no sequencer (no feed), so the task's first event is taken from its outbox.
  const task = await app.deps.db.collection('tasks').findOne({ _id: tenant.taskId as never });
  const event = task?.pending_events?.[0] as EventEnvelope | undefined;
  // One failed delivery of that event to the hook, so the deliveries list and redeliver have something to show.
  if (event) {
    const attempt = {
      attempt: 1,
      status_code: 503,
      error: null,
      duration_ms: 12,
      succeeded: false,
      next_retry_at: null,
      attempted_at: new Date(),
    };
    await app.repos.deliveries.recordAttempt({
      key: hookDeliveryKey(tenant.hookId!, event.event_id),
      target: { hook_id: tenant.hookId!, automation_id: null },
      event,
      attempt,
      job: { id: `${tenant.hookId!}:${event.event_id}:event`, target: { kind: 'hook', hook_id: tenant.hookId! } },
    });
  }
  return {
    ...tenant,
    itemId: tenant.itemId!,
    taskId: tenant.taskId!,
    hookId: tenant.hookId!,
    automationId: automation.json().automation_id,
    eventId: event?.event_id ?? 'evt_000000000000000000000000',
  };
}

/** A company whose every name carries `marker`, so a leak of any of them is easy to spot. */
async function createForeignTenant(app: FastifyInstance, marker: string): Promise<Tenant> {
  const company = (await admin(app, 'POST', '/companies', { name: `${marker} Holdings` }, 201)).json();
  const user = (
    await admin(
      app,
      'POST',
      `/companies/${company.company_id}/users`,
      { name: `${marker} Person`, email: `${marker.toLowerCase()}@foreign.example` },
      201,
    )
  ).json();
  const pipeline = (
    await admin(
      app,
      'POST',
      `/companies/${company.company_id}/pipelines`,
      {
        name: `${marker} Pipeline`,
        stages: [{ name: `${marker} Stage A` }, { name: `${marker} Stage B` }],
        statuses: [{ name: `${marker} Status` }],
        fields: [{ name: `${marker.toLowerCase()}_field`, type: 'text' }],
      },
      201,
    )
  ).json();
  return tenantFrom(company, user, pipeline, await createKey(app, company.company_id, user.user_id));
}

export async function seedFuzzWorld(app: FastifyInstance): Promise<FuzzWorld> {
  const marker = `Zq${randomBytes(4).toString('hex')}`;
  const own = await seedTenant(app, await createTenant(app));
  const sandbox = await seedTenant(app, await createTenant(app));
  const foreign = await seedTenant(app, await createForeignTenant(app, marker), {
    item: `${marker} Item`,
    task: `${marker} Task`,
    automation: `${marker} Automation`,
  });
  const ids = [
    foreign.companyId,
    foreign.userId,
    foreign.pipelineId,
    ...foreign.stageIds,
    ...foreign.statusIds,
    foreign.keyId,
    foreign.itemId,
    foreign.taskId,
    foreign.hookId,
    foreign.automationId,
    foreign.eventId,
  ];
  // The marker alone covers every name, email, field and note of the foreign company.
  return { own, sandbox, foreign, foreignMarkers: [marker, marker.toLowerCase(), ...ids] };
}
