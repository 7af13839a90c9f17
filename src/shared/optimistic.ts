import { UnavailableError } from './errors.js';

/**
 * Every attempt of a compare-and-set lost to another writer. DECISIONS.md section 2 keeps 409
 * `version_conflict` for a `version` (412 for an `If-Match`) the client sent and that is not current;
 * a request without one that keeps losing is a passing condition of the server, answered like an
 * unreachable database: 503 `unavailable` with `Retry-After`, nothing changed, safe to retry (with the
 * same `Idempotency-Key`).
 */
export class ContendedError extends UnavailableError {
  constructor(what: string) {
    super(`The ${what} is being changed by many writers at once; nothing changed, retry shortly`);
  }
}

/**
 * Runs `attempt` until it returns a result; `null` means it lost its compare-and-set and should read
 * again. After `retries` lost attempts: ContendedError (the one answer for every resource).
 */
export async function retryLostRaces<T>(what: string, retries: number, attempt: () => Promise<T | null>): Promise<T> {
  for (let tries = 0; tries < retries; tries++) {
    const result = await attempt();
    if (result !== null) return result;
  }
  throw new ContendedError(what);
}
