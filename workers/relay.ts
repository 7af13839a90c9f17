import type { RoleStarter } from './role.js';

/**
 * The relay role: moves events recorded in document outboxes to the `events` collection and onto the
 * queues, and reconciles: every RECONCILE_INTERVAL_MS (and as soon as Redis answers again) one relay
 * process across all workers checks whether Redis lost work, and schedules again what MongoDB says is
 * unfinished (src/events/relay.ts, src/events/reconciler.ts, docs/events.md).
 */
export const startRelay: RoleStarter = async ({ container }) =>
  container.processors.relay(container.services.publisher);
