import { buildCompanyEvent } from '../contracts/company-events.js';
import { HOOK_DISABLED, SYSTEM_ACTOR, type EventEnvelope } from '../contracts/envelope.js';
import { toHookResponse } from './schemas.js';
import type { HookDoc } from './repository.js';

/**
 * The hook.disabled event of a hook its failures disable at `at` (DECISIONS.md section 13.2): `data` is the hook
 * as its subscriber sees it (never the secret), already disabled; caused by the system, not by a key.
 */
export function hookDisabledEvent(hook: HookDoc, at: Date): EventEnvelope {
  const data = toHookResponse({ ...hook, disabled_at: at, disabled_reason: 'failing' }, at);
  return buildCompanyEvent(HOOK_DISABLED, hook.company_id, data, { actor: SYSTEM_ACTOR, occurredAt: at });
}
