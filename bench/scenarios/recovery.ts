import { pino } from 'pino';
import { buildEvent, type EventEnvelope } from '../../src/contracts/envelope.js';
import { EventsRepository } from '../../src/events/repository.js';
import { HooksRepository } from '../../src/hooks/repository.js';
import { createChangeFeeds } from '../../src/shared/change-feeds.js';
import { onMongoCommand } from '../../src/shared/mongo-commands.js';
import { connectMongo } from '../../src/shared/mongo.js';
import { BenchReceiver } from '../receiver.js';
import { int, ms, type Row } from '../report.js';
import { createTenants, type Tenant } from '../seed.js';
import { json, type BenchContext } from './context.js';
import { taskCreatedEvent } from './webhooks.js';

/** Hooks per company for the filter comparison: HOOK_MAX_PER_COMPANY. */
const HOOKS = 25;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function api(context: BenchContext, tenant: Tenant, method: string, path: string, body?: unknown) {
  const response = await fetch(`${context.stack.web.url}/v1/ext${path}`, {
    method,
    headers: { 'x-api-key': tenant.key, ...json },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * Hook recovery (DECISIONS.md 13.2) and the cost of `filter.changes` in the fan-out (issue 62): how fast a
 * recovery re-sends what a hook missed to a fast receiver, and what judging 25 hooks' filters costs per event.
 */
export async function runRecoveryScenarios(context: BenchContext): Promise<Row[]> {
  return [...(await recoveryThroughput(context)), ...(await filteredFanOut(context))];
}

/**
 * A company's events recorded while it had no hook (so none was attempted), then a hook on a fast receiver and
 * POST .../recover over the period: events re-sent per second, from the request to the last arrival. The
 * recovery keeps at most twice HOOK_MAX_IN_FLIGHT_PER_HOOK (4) deliveries waiting, so this is one hook's pace.
 */
async function recoveryThroughput(context: BenchContext): Promise<Row[]> {
  const { stack, options } = context;
  const count = options.quick ? 2_000 : 10_000;
  const [tenant] = await createTenants(stack, 'Bench Recovery', 1);
  if (!tenant) throw new Error('no tenant');
  const receiver = await BenchReceiver.start();
  try {
    const since = new Date(Date.now() - 1_000).toISOString();
    const events: EventEnvelope[] = Array.from({ length: count }, (_, index) => taskCreatedEvent(tenant, index));
    const store = new EventsRepository(stack.db);
    for (let i = 0; i < events.length; i += 1_000) await store.record(events.slice(i, i + 1_000));
    // Readable (sequenced), and fanned out while the company had no hook.
    const last = events.at(-1)!;
    for (;;) {
      const response = await fetch(`${stack.web.url}/v1/ext/events/${last.event_id}`, {
        headers: { 'x-api-key': tenant.key },
      });
      const fannedOut =
        (await stack.db
          .collection('events')
          .countDocuments({ company_id: tenant.companyId, pending: 'hook-fanout' })) === 0;
      if (response.status === 200 && fannedOut) break;
      await sleep(100);
    }
    const hook = await api(context, tenant, 'POST', '/hooks', {
      target_url: receiver.url('/recovery'),
      events: ['task.created'],
    });
    receiver.reset();
    const started = performance.now();
    const startedAt = Date.now();
    const recovery = await api(context, tenant, 'POST', `/hooks/${String(hook.hook_id)}/recover`, { since });
    const answered = performance.now() - started;
    const complete = await receiver.waitFor(count, Math.max(120_000, count * 20));
    const seconds = ((complete ? receiver.lastArrival : Date.now()) - startedAt) / 1_000;
    return [
      {
        scenario: `hook recovery: ${int(count)} missed events re-sent to a fast receiver (one hook, POST .../recover to the last arrival)`,
        value: `${int(receiver.received / seconds)} events/s (${seconds.toFixed(1)} s; queued ${String(recovery.queued)}, received ${int(receiver.received)}, ${receiver.duplicates} twice; the 202 took ${ms(answered)})`,
        // Information; a recovery that lost or skipped events is a broken run.
        pass: complete && recovery.queued === count ? undefined : false,
      },
    ];
  } finally {
    await receiver.close();
  }
}

/**
 * The fan-out's judgement of one item.updated event against a company's 25 hooks (the repository's cached
 * lookup, as the hooks worker runs it): without filters (every hook takes it) and with a `filter.changes` on
 * each (a stage move into one of the pipeline's stages, or a custom field), µs per event and MongoDB commands.
 */
async function filteredFanOut(context: BenchContext): Promise<Row[]> {
  const { stack, options } = context;
  const count = options.quick ? 20_000 : 100_000;
  const [plain, filtered] = await createTenants(stack, 'Bench Filters', 2);
  if (!plain || !filtered) throw new Error('no tenants');
  const receiver = await BenchReceiver.start(); // never delivered to: only the lookup is measured
  const feeds = createChangeFeeds(stack.redis as never, stack.queuePrefix, pino({ level: 'silent' }));
  const mongo = await connectMongo(stack.mongo.url, stack.dbName, 5_000, { monitorCommands: true });
  try {
    for (let i = 0; i < HOOKS; i++) {
      await api(context, plain, 'POST', '/hooks', { target_url: receiver.url(`/p${i}`), events: ['item.updated'] });
      const stage = filtered.stageIds[i % filtered.stageIds.length]!;
      const changes = i % 5 === 4 ? { deal_value: {} } : { stage: { to: stage } };
      await api(context, filtered, 'POST', '/hooks', {
        target_url: receiver.url(`/f${i}`),
        events: ['item.updated'],
        filter: { pipeline_id: filtered.pipelineId, changes },
      });
    }
    for (let i = 0; i < 100 && !feeds.hooks.live; i++) await sleep(50);
    const hooks = new HooksRepository(mongo.db, feeds.hooks);
    const eventsOf = (tenant: Tenant) =>
      Array.from({ length: 1_000 }, (_, index) =>
        buildEvent(
          'item.updated',
          tenant.companyId,
          { item_id: `itm_${index}`, pipeline: tenant.pipelineId, stage: tenant.stageIds[index % 4] },
          {
            actor: { type: 'system' },
            changes:
              index % 3 === 0
                ? { name: { from: 'Acme', to: 'Acme 2027' } }
                : { stage: { from: tenant.stageIds[0], to: tenant.stageIds[index % tenant.stageIds.length] } },
          },
        ),
      );
    const measure = async (tenant: Tenant) => {
      const events = eventsOf(tenant);
      for (const event of events.slice(0, 200)) await hooks.enabledFor(event); // warm: cache and JIT
      let commands = 0;
      const stop = onMongoCommand(mongo.client, () => commands++);
      let matched = 0;
      const started = performance.now();
      for (let i = 0; i < count; i++) matched += (await hooks.enabledFor(events[i % events.length]!)).length;
      const elapsed = performance.now() - started;
      stop();
      return { usPerEvent: (elapsed * 1_000) / count, matchedPerEvent: matched / count, commands };
    };
    const without = await measure(plain);
    const withFilters = await measure(filtered);
    const row = (label: string, figures: typeof without): Row => ({
      scenario: `fan-out lookup of one item.updated against ${HOOKS} hooks of a company, ${label} (${int(count)} events)`,
      value: `${figures.usPerEvent.toFixed(1)} µs/event, ${figures.matchedPerEvent.toFixed(2)} hooks matched/event, ${figures.commands} MongoDB commands`,
      target: 'no MongoDB command per event',
      pass: figures.commands === 0,
    });
    return [
      row('without filters', without),
      {
        ...row('each with filter.changes (stage to, or a custom field)', withFilters),
        ratio: withFilters.usPerEvent / without.usPerEvent,
      },
    ];
  } finally {
    feeds.close();
    await mongo.client.close();
    await receiver.close();
  }
}
