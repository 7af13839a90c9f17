import type { Problem, ProblemCode } from './types.js';

/** An answer with a problem body (4xx/5xx), thrown by `ok()`, the list iterators and the feed tailer. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: ProblemCode;
  readonly problem: Problem;

  constructor(problem: Problem, status = problem.status) {
    super(`${status} ${problem.code}${problem.detail ? `: ${problem.detail}` : ''}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = problem.code;
    this.problem = problem;
  }
}

/**
 * The data of a call that succeeded, else an ApiError carrying the problem:
 * `const item = ok(await api.POST('/v1/ext/items', { body }))`.
 */
export function ok<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.error !== undefined || !result.response.ok) throw toApiError(result.error, result.response);
  return result.data as T;
}

export function toApiError(body: unknown, response: Response): ApiError {
  if (body && typeof body === 'object' && typeof (body as Problem).code === 'string') {
    return new ApiError(body as Problem, response.status);
  }
  // Not a problem document (a proxy's page, say): kept as the detail.
  return new ApiError(
    {
      type: 'about:blank',
      title: response.statusText || 'Error',
      status: response.status,
      code: response.status >= 500 ? 'internal' : 'bad_request',
      detail: typeof body === 'string' ? body.slice(0, 500) : undefined,
      request_id: response.headers.get('x-request-id') ?? '',
    },
    response.status,
  );
}
