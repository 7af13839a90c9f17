import { ApiKeysRepository } from './auth/api-keys.repository.js';
import { AutomationsRepository } from './automations/repository.js';
import { CompaniesRepository } from './companies/repository.js';
import { ErasuresRepository } from './erasure/repository.js';
import { EventsRepository } from './events/repository.js';
import { HistoryRepository } from './history/repository.js';
import { DeliveriesRepository } from './hooks/deliveries.repository.js';
import { RecoveriesRepository } from './hooks/recoveries.repository.js';
import { HooksRepository } from './hooks/repository.js';
import { WebhookSecretsRepository } from './hooks/webhook-secrets.repository.js';
import { IdempotencyRepository } from './idempotency/repository.js';
import { ItemsRepository } from './items/repository.js';
import { PipelinesRepository } from './pipelines/repository.js';
import { TasksRepository } from './tasks/repository.js';
import { UsersRepository } from './users/repository.js';
import type { ChangeFeeds } from './shared/change-feeds.js';
import type { Logger } from './shared/logger.js';
import type { Db } from 'mongodb';

export interface RepositoryOptions {
  /** Announce hook and pipeline changes to other processes and cache their reads; without, read every time. */
  changes?: ChangeFeeds;
  /** EVENTS_RETENTION_DAYS (default 30). */
  eventsRetentionDays?: number;
  /** HISTORY_RETENTION_DAYS (default 365). */
  historyRetentionDays?: number;
}

/** One repository per collection; the only code that touches that collection. */
export function createRepositories(db: Db, options: RepositoryOptions = {}) {
  const events = new EventsRepository(db, options.eventsRetentionDays);
  const items = new ItemsRepository(db, events);
  return {
    events,
    companies: new CompaniesRepository(db),
    users: new UsersRepository(db),
    pipelines: new PipelinesRepository(db, options.changes?.pipelines),
    apiKeys: new ApiKeysRepository(db),
    items,
    tasks: new TasksRepository(db, events),
    idempotency: new IdempotencyRepository(db),
    automations: new AutomationsRepository(db),
    hooks: new HooksRepository(
      db,
      options.changes?.hooks,
      (companyId, itemId) => items.pipelineOf(companyId, itemId),
      events,
    ),
    deliveries: new DeliveriesRepository(db),
    history: new HistoryRepository(db, options.historyRetentionDays),
    erasures: new ErasuresRepository(db),
    recoveries: new RecoveriesRepository(db),
    webhookSecrets: new WebhookSecretsRepository(db),
  };
}

export type Repositories = ReturnType<typeof createRepositories>;

/**
 * Every repository's indexes; idempotent, run at start by web and worker processes (several at once is fine). An
 * index whose declaration changed is rebuilt when migratable (one log line each), else start stops with
 * IndexMigrationRequired (docs/mongodb.md, "Index changes"). Returns the rebuilt indexes.
 */
export async function ensureIndexes(db: Db, logger?: Logger): Promise<string[]> {
  const rebuilt: string[] = [];
  for (const repository of [
    CompaniesRepository,
    UsersRepository,
    PipelinesRepository,
    ApiKeysRepository,
    ItemsRepository,
    TasksRepository,
    IdempotencyRepository,
    AutomationsRepository,
    HooksRepository,
    DeliveriesRepository,
    RecoveriesRepository,
    EventsRepository,
    HistoryRepository,
    ErasuresRepository,
  ]) {
    for (const index of await repository.ensureIndexes(db)) {
      logger?.warn({ index }, 'index rebuilt: its declaration changed');
      rebuilt.push(index);
    }
  }
  return rebuilt;
}
