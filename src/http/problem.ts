import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { AppError } from '../shared/errors.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
const ERROR_DOCS_BASE = 'https://docs.example/errors/';

/** RFC 9457 body shared by every error response (DECISIONS.md section 2). */
export const problemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    code: z.string(),
    detail: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
    required_scope: z.string().optional(),
    current_version: z.number().int().optional(),
    request_id: z.string(),
  })
  .meta({ id: 'Problem' });

export type Problem = z.infer<typeof problemSchema>;

export function problemFromError(error: AppError, requestId: string): Problem {
  return {
    type: ERROR_DOCS_BASE + error.code,
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
