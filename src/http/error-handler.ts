import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import {
  AppError,
  InvalidJsonError,
  NotFoundError,
  UnavailableError,
  ValidationError,
  type FieldProblem,
} from '../shared/errors.js';
import { isMongoUnavailable } from '../shared/mongo.js';
import { sendProblem } from './problem.js';

interface ZodIssueLike {
  instancePath: string;
  message: string;
  keyword: string;
  params: { keys?: string[] };
}

/** Turns request-schema issues into `errors[]` entries with dotted paths (`metadata.size`). */
export function fieldProblemsFromValidation(issues: ZodIssueLike[]): FieldProblem[] {
  return issues.flatMap((issue) => {
    const base = issue.instancePath.split('/').filter(Boolean).join('.');
    if (issue.keyword === 'unrecognized_keys' && issue.params.keys) {
      return issue.params.keys.map((key) => ({
        path: base ? `${base}.${key}` : key,
        message: 'unknown field',
      }));
    }
    return [{ path: base, message: issue.message }];
  });
}

/** Maps Fastify's own errors (body parsing, limits) onto the problem codes of DECISIONS.md section 2. */
function fromFastifyError(error: FastifyError): AppError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new InvalidJsonError();
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError(413, 'payload_too_large', 'Payload too large', 'The request body exceeds 1 MiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError(415, 'unsupported_media_type', 'Unsupported media type', 'Send the body as application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError(400, 'bad_request', 'Bad request', 'Content-Length does not match the body');
  }
  if (error instanceof SyntaxError && error.statusCode === 400) return new InvalidJsonError();
  return undefined;
}

/**
 * Errors Fastify raises while routing, before any hook or error handler runs (its `frameworkErrors`
 * option); without this they would leave as Fastify's own JSON instead of problem+json.
 */
export function handleFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
  // An over-long id is a malformed id, and those are 404 like unknown ones (DECISIONS.md section 1).
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return void sendProblem(reply, new NotFoundError('Route'));
  if (error.code === 'FST_ERR_BAD_URL') return void sendProblem(reply, new AppError(400, 'bad_request', 'Bad request', 'The request URL is malformed'));
  request.log.error({ err: error }, 'routing error');
  sendProblem(reply, new AppError(500, 'internal', 'Internal error', 'Something went wrong on our side'));
}

export function registerErrorHandling(app: FastifyInstance<any, any, any, any, any>): void {
  app.setNotFoundHandler((request, reply) => sendProblem(reply, new NotFoundError('Route')));

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof AppError) return sendProblem(reply, error);
    if (hasZodFastifySchemaValidationErrors(error)) {
      return sendProblem(reply, new ValidationError(fieldProblemsFromValidation(error.validation as ZodIssueLike[])));
    }
    const mapped = fromFastifyError(error);
    if (mapped) return sendProblem(reply, mapped);
    if (isMongoUnavailable(error)) {
      request.log.warn({ err: error }, 'mongodb unavailable');
      return sendProblem(reply, new UnavailableError());
    }
    // Other 4xx raised by Fastify itself (e.g. malformed headers) keep their status but not their text.
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return sendProblem(reply, new AppError(error.statusCode, 'bad_request', 'Bad request', 'The request is malformed'));
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, new AppError(500, 'internal', 'Internal error', 'Something went wrong on our side'));
  });
}
