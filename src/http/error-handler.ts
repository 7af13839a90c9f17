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
import { withTimeout } from '../shared/time.js';
import { sendProblem } from './problem.js';
import type {
  FastifyBaseLogger,
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  FastifyTypeProvider,
  RawServerDefault,
} from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route's checks of the ids in its body (they must resolve in the caller's company). They also
     * run when the body fails its schema, on whatever is well typed, so `errors[]` lists every problem
     * at once (DECISIONS.md section 2) instead of the reference problems only on the next try.
     */
    referenceProblems?: (request: FastifyRequest) => Promise<FieldProblem[]>;
  }
}

/**
 * The fields among `names` whose values pass their own schema in `body` (a body whose other fields
 * failed): only these are looked up, so a malformed or over-long value never reaches a query or a cache.
 */
export function wellFormedFields<S extends z.ZodObject, K extends keyof S['shape'] & string>(
  schema: S,
  body: unknown,
  names: readonly K[],
): Partial<Pick<z.output<S>, K>> {
  const fields: Record<string, unknown> = {};
  if (!body || typeof body !== 'object') return fields as Partial<Pick<z.output<S>, K>>;
  for (const name of names) {
    const raw = (body as Record<string, unknown>)[name];
    if (raw === undefined) continue;
    const parsed = (schema.shape[name] as z.ZodType).safeParse(raw);
    if (parsed.success) fields[name] = parsed.data;
  }
  return fields as Partial<Pick<z.output<S>, K>>;
}

/** The lookups behind a 400 are a courtesy: they never hold the answer up for long. */
const REFERENCE_CHECK_TIMEOUT_MS = 1_000;

/** Reference problems of a body that failed its schema, for fields the schema did not already report. */
async function referenceProblemsAlongside(request: FastifyRequest, reported: FieldProblem[]): Promise<FieldProblem[]> {
  const check = request.routeOptions.config?.referenceProblems;
  if (!check || !request.auth) return [];
  const reportedFields = new Set(reported.map((problem) => problem.path.split('.')[0]));
  try {
    const found = await withTimeout(check(request), REFERENCE_CHECK_TIMEOUT_MS);
    return found.filter((problem) => !reportedFields.has(problem.path.split('.')[0]));
  } catch {
    return []; // the schema problems are the answer either way; the lookups are a courtesy
  }
}

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
  if (error.code === 'FST_ERR_BAD_URL')
    return void sendProblem(reply, new AppError(400, 'bad_request', 'Bad request', 'The request URL is malformed'));
  request.log.error({ err: error }, 'routing error');
  sendProblem(reply, new AppError(500, 'internal', 'Internal error', 'Something went wrong on our side'));
}

/**
 * 404 for a path no route matches. Set at the root and again inside the /v1/ext/ and /v1/admin/
 * plugins, so an unknown path there passes that plugin's auth hook first (401 before 404).
 */
export function answerUnknownRoute(request: FastifyRequest, reply: FastifyReply): void {
  sendProblem(reply, new NotFoundError('Route'));
}

export function registerErrorHandling<Provider extends FastifyTypeProvider>(
  app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, Provider>,
): void {
  app.setNotFoundHandler(answerUnknownRoute);

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    if (error instanceof AppError) return sendProblem(reply, error);
    if (hasZodFastifySchemaValidationErrors(error)) {
      const problems = fieldProblemsFromValidation(error.validation as ZodIssueLike[]);
      if (error.validationContext === 'body') problems.push(...(await referenceProblemsAlongside(request, problems)));
      return sendProblem(reply, new ValidationError(problems));
    }
    const mapped = fromFastifyError(error);
    if (mapped) return sendProblem(reply, mapped);
    if (isMongoUnavailable(error)) {
      request.log.warn({ err: error }, 'mongodb unavailable');
      return sendProblem(reply, new UnavailableError());
    }
    // Other 4xx raised by Fastify itself (e.g. malformed headers) keep their status but not their text.
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return sendProblem(
        reply,
        new AppError(error.statusCode, 'bad_request', 'Bad request', 'The request is malformed'),
      );
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendProblem(reply, new AppError(500, 'internal', 'Internal error', 'Something went wrong on our side'));
  });
}
