import type { Container } from '../src/container.js';
import type { QueueEventPublisher } from '../src/events/queue-publisher.js';
import type { Config, WorkerRole } from '../src/shared/config.js';
import type { Logger } from '../src/shared/logger.js';
import type { Resolver } from '../src/shared/target-guard.js';
import type { Db } from 'mongodb';

// What a worker role is, apart from start.ts, which starts them: the roles import this, start.ts imports the roles.

export interface WorkerOptions {
  config: Config;
  db: Db;
  logger: Logger;
  /** DNS for the webhook SSRF guard at delivery time; tests inject their own. */
  resolver?: Resolver;
}

/** What every role of a worker process shares: one container, its connections and its publisher. */
export interface WorkerContext extends WorkerOptions {
  container: Container<QueueEventPublisher>;
}

/**
 * What /healthz and /readyz of a worker report per role: `failing` means alive but unable to do its
 * work (e.g. the relay cannot publish), `stopped` means its consumer is no longer running at all.
 */
export type RoleState = 'starting' | 'running' | 'failing' | 'stopped' | 'stopping';

export interface RunningRole {
  /** Stops taking new work and waits for in-flight jobs to finish. */
  close(): Promise<void>;
  /** The role's state; roles without one are `running` until closed. */
  state?(): RoleState;
}

export interface RunningWorkers {
  close(): Promise<void>;
  /** Every configured role's state, by name. */
  states(): Partial<Record<WorkerRole, RoleState>>;
}

export type RoleStarter = (context: WorkerContext) => Promise<RunningRole>;
