import { ensureIndexes } from '../src/repositories.js';
import { startAutomations } from './automations.js';
import { startHooks } from './hooks.js';
import { startOverdue } from './overdue.js';
import { startRelay } from './relay.js';
import type { Config, WorkerRole } from '../src/config.js';
import type { Resolver } from '../src/hooks/target-guard.js';
import type { Logger } from '../src/shared/logger.js';
import type { Db } from 'mongodb';

export interface WorkerContext {
  config: Config;
  db: Db;
  logger: Logger;
  /** DNS for the webhook SSRF guard at delivery time; tests inject their own. */
  resolver?: Resolver;
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

/** One file per role; each exports a starter. Roles not yet built are simply absent. */
const ROLES: Partial<Record<WorkerRole, RoleStarter>> = {
  relay: startRelay,
  automations: startAutomations,
  hooks: startHooks,
  overdue: startOverdue,
};

export async function startWorkers(context: WorkerContext): Promise<RunningWorkers> {
  await ensureIndexes(context.db, context.logger);
  const running = new Map<WorkerRole, RunningRole>();
  let closing = false;
  for (const role of context.config.WORKERS) {
    const start = ROLES[role];
    if (!start) {
      context.logger.warn({ role }, 'worker role has no consumer yet');
      continue;
    }
    running.set(role, await start({ ...context, logger: context.logger.child({ role }) }));
    context.logger.info({ role }, 'worker role started');
  }
  return {
    async close() {
      closing = true;
      await Promise.all([...running.values()].map((role) => role.close()));
    },
    states() {
      return Object.fromEntries(
        [...running].map(([name, role]) => [name, closing ? 'stopping' : (role.state?.() ?? 'running')]),
      );
    },
  };
}
