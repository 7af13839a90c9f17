import { PerformanceObserver, constants } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Queue } from 'bullmq';

/**
 * Every metric of a process in one registry (web and worker processes each have their own, exposed
 * on /metrics and METRICS_PORT). Declared in one place so names and labels cannot drift.
 */
export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry });

/**
 * Heap in use just after the latest full (mark-sweep) collection. Heap used and RSS saw-tooth with
 * the garbage made between collections; this floor rises only with what stays reachable, so a leak
 * shows here first (the benchmark's memory rows judge its trend).
 */
const heapAfterFullGc = new Gauge({
  name: 'nodejs_heap_used_after_full_gc_bytes',
  help: 'V8 heap in use right after the latest full garbage collection',
  registers: [metricsRegistry],
});
/** The resident set at the same moment: RSS without the saw-tooth of garbage awaiting collection. */
const rssAfterFullGc = new Gauge({
  name: 'process_resident_memory_after_full_gc_bytes',
  help: 'Resident memory right after the latest full garbage collection',
  registers: [metricsRegistry],
});
new PerformanceObserver((list) => {
  const full = list
    .getEntries()
    .some((entry) => (entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR);
  if (!full) return;
  heapAfterFullGc.set(getHeapStatistics().used_heap_size);
  rssAfterFullGc.set(process.memoryUsage.rss());
}).observe({ entryTypes: ['gc'] });

export const httpRequestDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request duration by route and status',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [metricsRegistry],
});

export const rateLimitRejections = new Counter({
  name: 'rate_limit_rejections_total',
  help: 'Requests refused with 429, by reason',
  labelNames: ['reason'] as const,
  registers: [metricsRegistry],
});

export const webhookDeliveries = new Counter({
  name: 'webhook_deliveries_total',
  help: 'Webhook delivery attempts by outcome (success, failure, gone, refused) and error category (none when none)',
  labelNames: ['outcome', 'error'] as const,
  registers: [metricsRegistry],
});

export const webhookDeliveryDuration = new Histogram({
  name: 'webhook_delivery_duration_seconds',
  help: 'Duration of one webhook POST',
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [metricsRegistry],
});

export const webhookEventLatency = new Histogram({
  name: 'webhook_event_to_delivery_seconds',
  help: 'From the event being recorded to its successful delivery',
  buckets: [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 30, 300, 3600],
  registers: [metricsRegistry],
});

export const overdueScanDuration = new Histogram({
  name: 'overdue_scan_duration_seconds',
  help: 'Duration of one overdue scan',
  buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60],
  registers: [metricsRegistry],
});

export const overdueTasksFired = new Counter({
  name: 'overdue_tasks_fired_total',
  help: 'task.overdue events recorded by the scanner',
  registers: [metricsRegistry],
});

/**
 * One delivery attempt, as recorded in the deliveries log, counted by outcome and by its error
 * category (a handful of values: DELIVERY_ERRORS, or `none`), in one place for both processes.
 */
export function observeDeliveryAttempt(
  attempt: { succeeded: boolean; status_code: number | null; error: string | null; duration_ms: number },
  occurredAt: string,
): void {
  const outcome = attempt.succeeded
    ? 'success'
    : attempt.status_code === 410
      ? 'gone'
      : attempt.error === 'refused_target'
        ? 'refused'
        : 'failure';
  webhookDeliveries.inc({ outcome, error: attempt.error ?? 'none' });
  webhookDeliveryDuration.observe(attempt.duration_ms / 1000);
  if (attempt.succeeded) webhookEventLatency.observe(Math.max(0, Date.now() - Date.parse(occurredAt)) / 1000);
}

const trackedQueues = new Set<Queue>();
/** Each web app's count of documents with pending events, per outbox collection (events/outbox.ts). */
type OutboxCounter = () => Promise<Array<{ collection: string; pending: number }>>;
const trackedOutboxes = new Set<OutboxCounter>();

/** Queue depth is read from Redis at scrape time; a Redis outage leaves the gauge empty rather than failing the scrape. */
new Gauge({
  name: 'queue_jobs',
  help: 'Jobs per queue and state',
  labelNames: ['queue', 'state'] as const,
  registers: [metricsRegistry],
  async collect() {
    this.reset();
    for (const queue of trackedQueues) {
      try {
        const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized');
        for (const [state, count] of Object.entries(counts)) this.set({ queue: queue.name, state }, count);
      } catch {
        // Redis unreachable: report nothing for this queue
      }
    }
  },
});

/** How long the oldest waiting job of each queue has waited: depth alone hides a stuck consumer behind a short queue. */
new Gauge({
  name: 'queue_oldest_waiting_seconds',
  help: 'Age of the oldest job waiting in each queue (0 when none waits)',
  labelNames: ['queue'] as const,
  registers: [metricsRegistry],
  async collect() {
    this.reset();
    for (const queue of trackedQueues) {
      try {
        const [oldest] = await queue.getJobs(['wait'], 0, 0, true);
        this.set({ queue: queue.name }, oldest ? Math.max(0, Date.now() - oldest.timestamp) / 1000 : 0);
      } catch {
        // Redis unreachable: report nothing for this queue
      }
    }
  },
});

new Gauge({
  name: 'outbox_pending_documents',
  help: 'Documents whose recorded events are not yet on the queues',
  labelNames: ['collection'] as const,
  registers: [metricsRegistry],
  async collect() {
    this.reset();
    for (const count of trackedOutboxes) {
      try {
        for (const { collection, pending } of await count()) this.inc({ collection }, pending);
      } catch {
        // MongoDB unreachable: report nothing
      }
    }
  },
});

export function trackQueues(queues: Queue[]): () => void {
  for (const queue of queues) trackedQueues.add(queue);
  return () => queues.forEach((queue) => trackedQueues.delete(queue));
}

export function trackOutbox(count: OutboxCounter): () => void {
  trackedOutboxes.add(count);
  return () => trackedOutboxes.delete(count);
}
