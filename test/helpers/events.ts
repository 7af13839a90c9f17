import { isEventBatch, type EventJobData } from '../../src/contracts/jobs.js';
import { taskSchema } from '../../src/contracts/tasks.js';
import { ext } from './fixtures.js';
import { waitFor } from './wait.js';
import type { EventEnvelope } from '../../src/contracts/envelope.js';
import type { FastifyInstance } from 'fastify';

/**
 * A task in API shape (the reference's example) with the given fields: what an event built by a test
 * carries as `data`, so that its webhook matches the task payload schema like the service's own.
 */
export function taskData(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...(taskSchema.meta()?.example as Record<string, unknown>), ...fields };
}

/** The events a job of an event queue carries: a move's batch, or one event. */
export function eventsOfJob(data: EventJobData): EventEnvelope[] {
  return isEventBatch(data) ? data.events : [data];
}

/** The keys of an event envelope as the feed and webhooks carry it (no `changes` on a create), sorted. */
export const ENVELOPE_KEYS = ['actor', 'company_id', 'data', 'event_id', 'occurred_at', 'sequence', 'type'];

/**
 * Every event of the key's company in the feed (`GET /v1/ext/events`) matching `query` (e.g.
 * `resource_id=tsk_...`), all pages, in sequence order: what a client reading the feed gets.
 */
export async function feedEvents(app: FastifyInstance, key: string, query = ''): Promise<EventEnvelope[]> {
  const seen: EventEnvelope[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1_000; pages++) {
    const position = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
    const response = await ext(app, key, 'GET', `/events?limit=200${query ? `&${query}` : ''}${position}`);
    if (response.statusCode !== 200) throw new Error(`GET /events: ${response.statusCode} ${response.body}`);
    const page = response.json<EventEnvelope[]>();
    if (page.length === 0) return seen;
    seen.push(...page);
    cursor = response.headers['x-next-cursor'] as string;
  }
  throw new Error('GET /events: paging never ended');
}

/** Waits until the feed holds at least `count` events matching `query`, and returns all it holds. */
export async function waitForFeed(
  app: FastifyInstance,
  key: string,
  query: string,
  count: number,
  timeoutMs = 10_000,
): Promise<EventEnvelope[]> {
  const events = await waitFor(
    async () => {
      const found = await feedEvents(app, key, query);
      return found.length >= count ? found : undefined;
    },
    timeoutMs,
    100,
  );
  return events!;
}

/** The events of one task or item in the feed, once at least `count` of them are readable. */
export function feedOf(app: FastifyInstance, key: string, resourceId: string, count = 1): Promise<EventEnvelope[]> {
  return waitForFeed(app, key, `resource_id=${encodeURIComponent(resourceId)}`, count);
}

/**
 * The `outbox_pending_documents` gauge of /metrics by collection (items, tasks, hooks): how many documents hold
 * events not yet moved to the durable record. The gauge is process-wide: it sums the databases of every app open in
 * this process, so a file with several apps open sees them all.
 */
export async function outboxBacklog(app: FastifyInstance): Promise<Record<string, number>> {
  const response = await app.inject({ method: 'GET', url: '/metrics' });
  if (response.statusCode !== 200) throw new Error(`GET /metrics: ${response.statusCode}`);
  const backlog: Record<string, number> = {};
  for (const [, collection, value] of response.body.matchAll(
    /^outbox_pending_documents\{collection="(\w+)"\} (\d+)$/gm,
  ))
    backlog[collection!] = Number(value);
  return backlog;
}
