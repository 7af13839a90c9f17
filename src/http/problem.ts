import { z } from 'zod';
import { ERROR_CATALOGUE, errorTypeUri } from './error-reference.js';
import type { AppError } from '../shared/errors.js';
import type { FastifyReply } from 'fastify';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** RFC 9457 body shared by every error response (DECISIONS.md section 2). */
export const problemSchema = z
  .object({
    type: z.string().meta({
      format: 'uri-reference',
      description: 'Where this code is explained: `/docs/errors#<code>`',
      example: '/docs/errors#validation_failed',
    }),
    title: z.string(),
    status: z.number().int().min(400).max(599).describe('The HTTP status of the answer').meta({ example: 400 }),
    code: z
      .enum(Object.keys(ERROR_CATALOGUE) as [string, ...string[]])
      .describe('Stable, machine-readable; one of the codes at `/docs/errors`'),
    detail: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
    errors_truncated: z.boolean().optional().describe('Present (true) when `errors[]` was cut at 100 entries'),
    required_scope: z.string().optional(),
    current_version: z
      .number()
      .int()
      .min(1)
      .max(2_147_483_647)
      .optional()
      .describe('version_conflict, precondition_failed: the item version now stored')
      .meta({ example: 4 }),
    request_id: z.string(),
  })
  .meta({ id: 'Problem' });

export type Problem = z.infer<typeof problemSchema>;

export function problemFromError(error: AppError, requestId: string): Problem {
  return {
    type: errorTypeUri(error.code),
    title: error.title,
    status: error.status,
    code: error.code,
    ...(error.detail ? { detail: error.detail } : {}),
    ...error.extra,
    request_id: requestId,
  };
}

/** Sends an AppError as problem+json, serialized without the route's response schema. */
export function sendProblem(reply: FastifyReply, error: AppError): FastifyReply {
  reply.code(error.status).headers(error.headers).type(PROBLEM_CONTENT_TYPE);
  return reply.serializer(JSON.stringify).send(problemFromError(error, String(reply.request.id)));
}
