/**
 * Domain errors and their RFC 9457 problem shape (DECISIONS.md section 2).
 * Domain code throws these; the one error handler in `http/error-handler.ts` renders them.
 */
export interface FieldProblem {
  path: string;
  message: string;
}

export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly title: string,
    readonly detail?: string,
    /** Extra members of the problem body, e.g. `required_scope` or `current_version`. */
    readonly extra: Record<string, unknown> = {},
    /** Extra response headers, e.g. `Retry-After`. */
    readonly headers: Record<string, string> = {},
  ) {
    super(detail ?? title);
    this.name = new.target.name;
  }
}

/**
 * `errors[]` holds at most this many entries, then `errors_truncated: true` (DECISIONS.md section 12.4):
 * a body built to fail everywhere must not buy a multi-megabyte answer.
 */
export const MAX_FIELD_PROBLEMS = 100;

export class ValidationError extends AppError {
  readonly errors: FieldProblem[];
  /** `problems` may be longer than the cap: the detail still counts them all. */
  constructor(problems: FieldProblem[]) {
    const errors = problems.slice(0, MAX_FIELD_PROBLEMS);
    const truncated = problems.length > MAX_FIELD_PROBLEMS;
    super(400, 'validation_failed', 'Validation failed', summarize(problems), {
      errors,
      ...(truncated ? { errors_truncated: true } : {}),
    });
    this.errors = errors;
  }
  static single(path: string, message: string): ValidationError {
    return new ValidationError([{ path, message }]);
  }
  /** Checks collect every problem first; this reports them all at once, if there are any. */
  static throwIfAny(problems: FieldProblem[]): void {
    if (problems.length > 0) throw new ValidationError(problems);
  }
}

export class InvalidJsonError extends AppError {
  constructor() {
    super(400, 'invalid_json', 'Invalid JSON', 'The request body is not valid JSON');
  }
}

export class UnauthorizedError extends AppError {
  constructor(detail = 'A valid x-api-key header is required') {
    super(401, 'unauthorized', 'Unauthorized', detail);
  }
}

export class SubscriptionInactiveError extends AppError {
  constructor() {
    super(402, 'subscription_inactive', 'Subscription inactive', 'API access needs an active subscription');
  }
}

export class InsufficientScopeError extends AppError {
  constructor(requiredScope: string) {
    super(403, 'insufficient_scope', 'Insufficient scope', `This operation needs the ${requiredScope} scope`, {
      required_scope: requiredScope,
    });
  }
}

export class NotFoundError extends AppError {
  constructor(what = 'Resource') {
    super(404, 'not_found', 'Not found', `${what} not found`);
  }
}

export class VersionConflictError extends AppError {
  constructor(currentVersion: number) {
    super(409, 'version_conflict', 'Version conflict', 'The item was changed by someone else; reload it and retry', {
      current_version: currentVersion,
    });
  }
}

export class ExternalIdTakenError extends AppError {
  constructor() {
    super(409, 'external_id_taken', 'External id taken', 'Another item of this company already has this external_id', {
      errors: [{ path: 'external_id', message: 'is already the external_id of another item' }],
    });
  }
}

/** A second subscription with the same target and event types (DECISIONS.md section 12.2): names the hook, never its secret. */
export class HookExistsError extends AppError {
  constructor(hookId: string) {
    super(
      409,
      'hook_exists',
      'Hook exists',
      `Hook ${hookId} already sends these events to this target_url; rotate its secret if it was lost`,
      { hook_id: hookId },
    );
  }
}

/** A second recovery of a hook while one runs (DECISIONS.md section 13.2): names the running one's period. */
export class RecoveryInProgressError extends AppError {
  constructor(hookId: string, running: { since: string; until: string }) {
    super(
      409,
      'recovery_in_progress',
      'Recovery in progress',
      `Hook ${hookId} is being recovered already (events from ${running.since} to ${running.until}); retry once it has finished`,
      { hook_id: hookId, ...running },
    );
  }
}

export class HookLimitReachedError extends AppError {
  constructor(max: number) {
    super(
      400,
      'hook_limit_reached',
      'Hook limit reached',
      `A company may have at most ${max} hooks; delete one first`,
      {
        max_hooks: max,
      },
    );
  }
}

export class PreconditionFailedError extends AppError {
  /** `currentVersion` for items; a task has no version, only its ETag. */
  constructor(currentVersion?: number) {
    super(
      412,
      'precondition_failed',
      'Precondition failed',
      'If-Match does not match the current ETag',
      currentVersion === undefined ? {} : { current_version: currentVersion },
    );
  }
}

export class IdempotencyInProgressError extends AppError {
  constructor() {
    super(
      409,
      'idempotency_in_progress',
      'Request in progress',
      'A request with this Idempotency-Key is still running',
    );
  }
}

export class IdempotencyMismatchError extends AppError {
  constructor() {
    super(
      422,
      'idempotency_mismatch',
      'Idempotency key reused',
      'This Idempotency-Key was used with a different request body',
    );
  }
}

export class RateLimitedError extends AppError {
  constructor(retryAfterSeconds: number, detail = 'Rate limit exceeded') {
    super(429, 'rate_limited', 'Too many requests', detail, {}, { 'retry-after': String(retryAfterSeconds) });
  }
}

export class UnavailableError extends AppError {
  constructor(detail = 'A backing service is unreachable; retry shortly') {
    super(503, 'unavailable', 'Service unavailable', detail, {}, { 'retry-after': '5' });
  }
}

function summarize(errors: FieldProblem[]): string {
  const first = errors[0];
  if (!first) return 'The request is invalid';
  const head = first.path ? `${first.path}: ${first.message}` : first.message;
  return errors.length > 1 ? `${head} (and ${errors.length - 1} more)` : head;
}
