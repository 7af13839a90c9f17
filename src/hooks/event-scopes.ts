import { resourceOf } from '../contracts/envelope.js';
import type { Scope } from '../contracts/scopes.js';
import type { HookEvent } from './repository.js';

/**
 * The read scopes a hook's event type needs besides `hooks:manage` (DECISIONS.md section 13.4, the events
 * feed's rule of 12.1): a hook must not deliver what its key could not read. Other types (`hook.disabled`)
 * need none besides hooks:manage, which subscribing needs anyway.
 */
export function readScopesOf(type: HookEvent): Scope[] {
  if (type === '*') return ['tasks:read', 'items:read'];
  const resource = resourceOf(type);
  return resource === 'task' ? ['tasks:read'] : resource === 'item' ? ['items:read'] : [];
}

/** The first read scope these event types need that `scopes` lacks, in the order the types were given. */
export function missingReadScope(events: readonly HookEvent[], scopes: ReadonlySet<Scope>): Scope | undefined {
  return events.flatMap(readScopesOf).find((scope) => !scopes.has(scope));
}
