import { ApiKeysService } from './auth/api-keys.service.js';
import { ApiKeyAuthenticator } from './auth/authenticator.js';
import { processAutomationEvent } from './automations/processor.js';
import { AutomationsService } from './automations/service.js';
import { CompaniesService } from './companies/service.js';
import { historyRowsOf } from './contracts/history-rows.js';
import { requeueUnfinishedErasures, runErasure } from './erasure/job.js';
import { ErasureService } from './erasure/service.js';
import { FeedWaiters } from './events/feed-waiters.js';
import { EventFeed } from './events/feed.js';
import { ConsumerProgress } from './events/progress.js';
import { QueueEventPublisher, type QueueEventPublisherOptions } from './events/queue-publisher.js';
import { Reconciler } from './events/reconciler.js';
import { startRelayLoops } from './events/relay.js';
import { SequencerStore } from './events/sequencer-store.js';
import { ExportService } from './export/service.js';
import { HistoryRepository } from './history/repository.js';
import { HistoryService } from './history/service.js';
import { createHookProcessors } from './hooks/processors.js';
import { HooksService } from './hooks/service.js';
import { ItemsService } from './items/service.js';
import { PipelinesService } from './pipelines/service.js';
import { createRepositories } from './repositories.js';
import { createChangeFeeds } from './shared/change-feeds.js';
import { relayOnlyPublisher, type EventPublisher } from './shared/outbox.js';
import { CursorCodec } from './shared/pagination.js';
import { createQueue, jobStillQueued } from './shared/queues.js';
import { loadSharedSecret } from './shared/secrets.js';
import { TargetGuard, type Resolver } from './shared/target-guard.js';
import { TasksService } from './tasks/service.js';
import { UsersService } from './users/service.js';
import type { ErasureJob } from './contracts/jobs.js';
import type { EventsRepository } from './events/repository.js';
import type { Config } from './shared/config.js';
import type { Logger } from './shared/logger.js';
import type { QueueSettings, Queues } from './shared/queues.js';
import type { RedisClient } from './shared/redis.js';
import type { Job } from 'bullmq';
import type { Db } from 'mongodb';

/**
 * The events publisher (the fast path after a write, with a sequencer candidate): how every process builds it,
 * so whichever process's sequencer holds the lease writes the record history the same way.
 */
export function createEventPublisher(
  db: Db,
  settings: QueueSettings,
  logger: Logger,
  options: Omit<QueueEventPublisherOptions, 'history'> & { historyRetentionDays?: number } = {},
): QueueEventPublisher {
  const { historyRetentionDays, ...rest } = options;
  const history = new HistoryRepository(db, historyRetentionDays);
  return new QueueEventPublisher(db, settings, logger, {
    ...rest,
    history: {
      rowsOf: (events) => historyRowsOf(events, history.retentionDays),
      record: (rows) => history.record(rows),
    },
  });
}

/** Events evaluated at once by an automations worker, whichever jobs carry them. */
const AUTOMATIONS_CONCURRENCY = 10;
/** The most an erasure waits for the sequencer before its second pass (docs/erasure.md). */
const ERASURE_SETTLE_MS = 30_000;

export interface ContainerDeps<P extends EventPublisher = EventPublisher> {
  config: Config;
  db: Db;
  /** Fails fast while disconnected (change feeds, announcements); see shared/redis.ts. */
  redis: RedisClient;
  /** This process's queue handles (the web app's board and metrics use the same ones). */
  queues: Queues;
  logger: Logger;
  /** The fast path after a write, given the events repository; without, the relay delivers every event. */
  publisher?: (events: EventsRepository) => P;
  /** DNS for the webhook SSRF guard; tests inject their own. */
  resolver?: Resolver;
}

/** The cursor secret is shared through MongoDB and loaded on first use (building must not need the database). */
function lazyCursorCodec(db: Db): () => Promise<CursorCodec> {
  let codec: Promise<CursorCodec> | undefined;
  return () => {
    codec ??= loadSharedSecret(db, 'cursor').then((secret) => new CursorCodec(secret));
    codec.catch(() => (codec = undefined));
    return codec;
  };
}

/**
 * The one wiring point: every repository and domain service built once per process, from the
 * infrastructure passed in. The web app (src/app.ts) and the worker roles (workers/start.ts) take the
 * same objects from here, so a service acts the same wherever it runs.
 */
export function createContainer<P extends EventPublisher = EventPublisher>(deps: ContainerDeps<P>) {
  const { config, db, redis, queues, logger } = deps;
  // Hook, pipeline and access lookups are cached; changes reach every process over these feeds.
  const changes = createChangeFeeds(redis, config.QUEUE_PREFIX, logger);
  const repos = createRepositories(db, {
    changes,
    eventsRetentionDays: config.EVENTS_RETENTION_DAYS,
    historyRetentionDays: config.HISTORY_RETENTION_DAYS,
  });
  const publisher = deps.publisher ? deps.publisher(repos.events) : (relayOnlyPublisher as P);
  const cursors = lazyCursorCodec(db);
  const targetGuard = new TargetGuard(config.HOOK_ALLOW_PRIVATE_TARGETS, deps.resolver);
  const authenticator = new ApiKeyAuthenticator(repos.apiKeys, repos.companies, changes.access);
  const sequences = new SequencerStore(db);
  const feedWaiters = new FeedWaiters(changes.events, (companyIds) => sequences.readableOfMany(companyIds));
  /** Whether the company has or had (archived counts) the item or task: its history and erasure need it. */
  const recordKnown = async (kind: 'item' | 'task', companyId: string, id: string) =>
    kind === 'item'
      ? (await repos.items.pipelineOf(companyId, id)) !== null
      : await repos.tasks.existsEver(companyId, id);
  const eventFeed = new EventFeed({
    events: repos.events,
    sequences,
    cursors,
    waiters: feedWaiters,
    keyOfCompany: async (companyId, keyId) => (await repos.apiKeys.findById(companyId, keyId)) !== null,
  });
  const services = {
    publisher,
    /** This process's change feeds (tests wait on `live`). */
    changes,
    cursors,
    targetGuard,
    authenticator,
    pipelines: new PipelinesService({ pipelines: repos.pipelines }),
    companies: new CompaniesService({ companies: repos.companies, authentication: authenticator }),
    users: new UsersService({ users: repos.users }),
    feedWaiters,
    eventFeed,
    exports: new ExportService({ items: repos.items, tasks: repos.tasks, pipelines: repos.pipelines, feed: eventFeed }),
    history: new HistoryService({
      history: repos.history,
      cursors,
      recordKnown,
    }),
    erasures: new ErasureService({
      erasures: repos.erasures,
      logger,
      recordKnown,
      enqueue: async (job) => void (await queues.erasures.add('erasure', job, { jobId: job.erasure_id })),
    }),
    items: new ItemsService({ items: repos.items, pipelines: repos.pipelines, publisher, cursors }),
    tasks: new TasksService({ tasks: repos.tasks, users: repos.users, items: repos.items, publisher, cursors }),
    apiKeys: new ApiKeysService({ apiKeys: repos.apiKeys, users: repos.users, authenticator, hooks: repos.hooks }),
    automations: new AutomationsService({
      automations: repos.automations,
      users: repos.users,
      pipelines: repos.pipelines,
      targetGuard,
      webhookSecrets: repos.webhookSecrets,
    }),
    hooks: new HooksService({
      hooks: repos.hooks,
      deliveries: repos.deliveries,
      events: repos.events,
      recoveries: repos.recoveries,
      readablePosition: (companyId) => sequences.readableOf(companyId),
      guard: targetGuard,
      pipelineExists: async (companyId, pipelineId) =>
        (await repos.pipelines.findCached(companyId, pipelineId)) !== null,
      pipelines: repos.pipelines,
      maxHooksPerCompany: config.HOOK_MAX_PER_COMPANY,
      apiKey: (companyId, keyId) => repos.apiKeys.findById(companyId, keyId),
      // A Redis outage surfaces as the add's rejection (503 on the web).
      enqueueDelivery: async (data, jobId) => void (await queues.deliveries.add('delivery', data, { jobId })),
    }),
  };
  const fanOutJobQueued = (jobId: string) => jobStillQueued(queues['hook-fanout'], jobId);
  /**
   * Every queue's processors, built once per worker process from the same repositories and services as the
   * web's; the worker roles hand them to BullMQ. Each takes the role's own Redis connection where it needs one.
   */
  const processors = {
    /**
     * The relay's loops: outboxes to `events` and the queues, and the reconciliation. On the container's
     * fail-fast client, so a reconciliation fails during an outage rather than holding its lock waiting it out.
     */
    relay(publisher: QueueEventPublisher) {
      const deliveriesQueue = createQueue('deliveries', { connection: redis, prefix: config.QUEUE_PREFIX });
      deliveriesQueue.on('error', () => {});
      const reconciler = new Reconciler(
        {
          redis,
          prefix: config.QUEUE_PREFIX,
          eventStore: repos.events,
          publisher,
          deliveriesQueue,
          dueDeliveries: (limit, after) => repos.deliveries.dueAttempts(limit, after),
          logger,
        },
        Math.max(config.JOB_LOCK_MS, config.HOOK_TIMEOUT_MS) + 5_000,
      );
      const loops = startRelayLoops({
        db,
        publisher,
        reconciler,
        redis,
        prefix: config.QUEUE_PREFIX,
        reconcileIntervalMs: config.RECONCILE_INTERVAL_MS,
        logger,
      });
      return {
        state: loops.state,
        async close() {
          await loops.close();
          await deliveriesQueue.close();
        },
      };
    },
    /** `automations`: each task event against the company's rules (progress tracked by the events feature). */
    automations() {
      const progress = new ConsumerProgress('automations', repos.events, {
        concurrency: AUTOMATIONS_CONCURRENCY,
        jobExists: (jobId) => jobStillQueued(queues.automations, jobId),
      });
      const process = progress.track(async (event, job) => {
        const ran = await processAutomationEvent(event, {
          automations: repos.automations,
          tasks: services.tasks,
          items: services.items,
          enqueueDelivery: async (data, jobId) => void (await queues.deliveries.add('delivery', data, { jobId })),
          logger: logger.child({ job_id: job.id, attempt: job.attemptsMade + 1 }),
        });
        return { ran };
      });
      return { process, concurrency: AUTOMATIONS_CONCURRENCY, close: () => progress.close() };
    },
    /** `erasures`: one erasure job, and the sweep that queues again those Redis may have lost. */
    erasures() {
      return {
        process: (job: Job<ErasureJob>) =>
          runErasure({ repos, queues, logger, settleMs: ERASURE_SETTLE_MS }, job.data.company_id, job.data.erasure_id),
        lockMs: Math.max(config.JOB_LOCK_MS, ERASURE_SETTLE_MS + 30_000),
        sweep: () => requeueUnfinishedErasures(repos.erasures, queues.erasures),
      };
    },
    /** `hook-fanout` (each event's progress tracked by the events feature) and `deliveries`, and hook recoveries. */
    hooks(connection: RedisClient) {
      const hooks = createHookProcessors({
        config,
        hooks: repos.hooks,
        deliveries: repos.deliveries,
        recoveries: repos.recoveries,
        webhookSecrets: repos.webhookSecrets,
        events: repos.events,
        publisherJobExists: async (event) => {
          if (await fanOutJobQueued(event.event_id)) return true;
          const { publishJob } = await repos.events.progressOf('hook-fanout', event);
          return publishJob !== undefined && (await fanOutJobQueued(publishJob));
        },
        deliveriesQueue: queues.deliveries,
        targetGuard,
        redis: connection,
        logger,
      });
      // One event in flight per HOOK_CONCURRENCY slot, however many events each fan-out job carries.
      const progress = new ConsumerProgress('hook-fanout', repos.events, {
        concurrency: config.HOOK_CONCURRENCY,
        jobExists: fanOutJobQueued,
      });
      return {
        ...hooks,
        fanOut: progress.track(hooks.fanOut),
        async close() {
          await hooks.close();
          await progress.close();
        },
      };
    },
  };
  return {
    config,
    db,
    redis,
    queues,
    repos,
    services,
    processors,
    /** Stops the change feeds; the queues, the publisher and the connections belong to the caller. */
    close: () => {
      feedWaiters.close();
      changes.close();
    },
  };
}

export type Container<P extends EventPublisher = EventPublisher> = ReturnType<typeof createContainer<P>>;
