import { z } from 'zod';
import { problemSchema } from './problem.js';

type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 409 | 412 | 413 | 415 | 422 | 429 | 503;

/** Error responses a route documents: each is the problem+json body. */
export function errorResponses(...statuses: ErrorStatus[]): Record<number, typeof problemSchema> {
  return Object.fromEntries(statuses.map((status) => [status, problemSchema]));
}

/** Errors every authenticated `/v1/ext/` route can answer with. */
export const EXT_ERRORS = [400, 401, 402, 403, 429, 503] as const;

export const noContent = z.null().describe('No content');
