import type { Db } from 'mongodb';
import type { Config, WorkerRole } from '../src/config.js';
import type { Logger } from '../src/shared/logger.js';
import type { Resolver } from '../src/hooks/target-guard.js';
import { ensureIndexes } from '../src/repositories.js';
import { startAutomations } from './automations.js';
import { startHooks } from './hooks.js';
import { startOverdue } from './overdue.js';
import { startRelay } from './relay.js';

export interface WorkerContext {
  config: Config;
  db: Db;
  logger: Logger;
  /** DNS for the webhook SSRF guard at delivery time; tests inject their own. */
  resolver?: Resolver;
}

export interface RunningRole {
  /** Stops taking new work and waits for in-flight jobs to finish. */
  close(): Promise<void>;
}

export type RoleStarter = (context: WorkerContext) => Promise<RunningRole>;

/** One file per role; each exports a starter. Roles not yet built are simply absent. */
const ROLES: Partial<Record<WorkerRole, RoleStarter>> = {
  relay: startRelay,
  automations: startAutomations,
  hooks: startHooks,
  overdue: startOverdue,
};

export async function startWorkers(context: WorkerContext): Promise<RunningRole> {
  await ensureIndexes(context.db);
  const running: RunningRole[] = [];
  for (const role of context.config.WORKERS) {
    const start = ROLES[role];
    if (!start) {
      context.logger.warn({ role }, 'worker role has no consumer yet');
      continue;
    }
    running.push(await start({ ...context, logger: context.logger.child({ role }) }));
    context.logger.info({ role }, 'worker role started');
  }
  return {
    async close() {
      await Promise.all(running.map((role) => role.close()));
    },
  };
}
