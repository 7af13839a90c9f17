import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { must } from '../../src/shared/must.js';
import { createQueue } from '../../src/shared/queues.js';
import { type QueueName } from '../../src/shared/queues.js';
import { Receiver } from '../hooks/receiver.js';
import { buildTestApp, startTestWorkers, type TestApp, type TestEnv } from './app.js';
import { admin, ext, type Tenant } from './fixtures.js';
import { waitFor } from './wait.js';
import type { EventConsumer } from '../../src/events/repository.js';
import type { WorkerRole } from '../../src/shared/config.js';
import type { FastifyInstance } from 'fastify';

/**
 * The setup every webhook test file shares: an app that publishes at once, the given worker roles, and
 * receivers closed after each test. Call at the top level of the file; `env.t` is set in beforeAll.
 */
export function hooksTestEnv(overrides: Record<string, string>, roles: WorkerRole[] = ['relay', 'hooks']) {
  const receivers: Receiver[] = [];
  let app: TestApp | undefined;
  const env = {
    /** The app on the file's database and queue prefix (from beforeAll on). */
    get t(): TestApp {
      if (!app) throw new Error('hooksTestEnv: the app is built in beforeAll');
      return app;
    },
    /** A loopback receiver answering as told (200 by default), closed after the test. */
    async receiver(answer?: Receiver['answer']): Promise<Receiver> {
      const started = await Receiver.start(answer);
      receivers.push(started);
      return started;
    },
    /** POST /hooks, insisting on 201. */
    async subscribe(tenant: Tenant, body: Record<string, unknown>) {
      const response = await ext(env.t.app, tenant.key, 'POST', '/hooks', body);
      expect(response.statusCode, response.body).toBe(201);
      return response.json();
    },
  };
  let workers: { close(): Promise<void> } | undefined;
  beforeAll(async () => {
    app = await buildTestApp({ RATE_LIMIT_MAX: '100000', ...overrides }, { publisher: true });
    workers = await startTestWorkers(app.config, app.db, roles);
  });
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  });
  afterAll(async () => {
    await workers?.close();
    await app?.close();
  });
  return env;
}

/** The ids of the events recorded about one task or item, once there are `count` of them. */
export async function eventIdsOf(t: TestApp, resourceId: string, count = 1): Promise<string[]> {
  const ids = await waitFor(async () => {
    const events = await t.db.collection('events').find({ resource_id: resourceId }).toArray();
    return events.length >= count ? events.map((event) => String(event._id)) : undefined;
  });
  return must(ids, 'the event ids');
}

/**
 * The positive signal before "nothing else arrived": the consumer has finished each event (its record
 * in `events` says so). The fan-out finishes an event after every first attempt it made was answered;
 * the automations consumer after every automation the event triggered ran.
 */
export async function eventsFinished(t: TestApp, consumer: EventConsumer, eventIds: string[]): Promise<void> {
  await waitFor(
    async () =>
      (await t.db.collection('events').countDocuments({ _id: { $in: eventIds as never[] } })) === eventIds.length &&
      (await t.db.collection('events').countDocuments({ _id: { $in: eventIds as never[] }, pending: consumer })) === 0,
  );
}

/** The positive signal before "nothing else arrived" for other jobs: the job `queue` ran for each id has finished. */
export async function jobsDone(t: TestApp, queue: QueueName, jobIds: string[]): Promise<void> {
  const handle = createQueue(queue, { connection: t.redis, prefix: t.config.QUEUE_PREFIX });
  try {
    await waitFor(async () => {
      const states = await Promise.all(jobIds.map((id) => handle.getJobState(id)));
      return states.every((state) => state === 'completed');
    });
  } finally {
    await handle.close();
  }
}

/**
 * The positive signal that every job of these queues has run its course: none waiting, prioritized, delayed (a
 * retry) or active. A job whose worker died stays active until a live worker's stalled-job check takes it back
 * (after about JOB_LOCK_MS) and runs it again, so an idle queue also means every such job has been run again (or
 * failed for good), and whatever a wrong re-run would send or write has been sent or written.
 */
export async function queuesIdle(env: Pick<TestEnv, 'redis' | 'config'>, queues: QueueName[], timeoutMs = 30_000) {
  const handles = queues.map((queue) => createQueue(queue, { connection: env.redis, prefix: env.config.QUEUE_PREFIX }));
  try {
    await waitFor(
      async () => {
        const counts = await Promise.all(
          handles.map((handle) => handle.getJobCounts('waiting', 'prioritized', 'delayed', 'active')),
        );
        return counts.every((count) => Object.values(count).every((n) => n === 0));
      },
      timeoutMs,
      100,
    );
  } finally {
    await Promise.all(handles.map((handle) => handle.close()));
  }
}

/** The automation runs of one rule, newest first (the admin API). */
export async function automationRuns(app: FastifyInstance, tenant: Tenant, automationId: string) {
  const url = `/companies/${tenant.companyId}/automation-runs?automation_id=${automationId}`;
  return (await admin(app, 'GET', url, undefined, 200)).json<Array<Record<string, unknown>>>();
}

/** Waits until the rule's runs satisfy `done` (e.g. one run, succeeded) and returns them. */
export function waitForRuns(
  app: FastifyInstance,
  tenant: Tenant,
  automationId: string,
  done: (runs: Array<Record<string, unknown>>) => boolean,
  timeoutMs?: number,
) {
  return waitFor(async () => {
    const runs = await automationRuns(app, tenant, automationId);
    return done(runs) ? runs : undefined;
  }, timeoutMs);
}
