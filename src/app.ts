import { randomUUID } from 'node:crypto';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type RawServerDefault,
  type RouteOptions,
} from 'fastify';
import { validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { adminApi } from './api/admin.js';
import { extApi } from './api/ext.js';
import { registerOpenApi, registerOpenApiRoutes } from './api/openapi.js';
import { opsRoutes } from './api/ops.js';
import { registerQueueBoard } from './api/queue-board.js';
import { registerReferencePages } from './api/reference-pages.js';
import { FailedAuthThrottle } from './auth/failed-auth-throttle.js';
import { LastUsedTracker } from './auth/last-used.js';
import { createContainer, type Container } from './container.js';
import { QUEUE_NAMES } from './contracts/jobs.js';
import { registerDeprecationHeaders } from './http/deprecation.js';
import { handleFrameworkError, registerErrorHandling } from './http/error-handler.js';
import { registerErrorReference } from './http/error-reference.js';
import { oversizeJsonProblem } from './http/json-shape.js';
import { registerRequestObservation } from './http/observation.js';
import { zodResponseSerializerCompiler } from './http/serializer.js';
import {
  answerClientError,
  holdHeadersDeadline,
  serverTimeoutOptions,
  trustProxyOption,
} from './http/server-options.js';
import { ValidationError } from './shared/errors.js';
import { createLogger, type Logger } from './shared/logger.js';
import { trackOutbox, trackQueues } from './shared/metrics.js';
import { relayOnlyPublisher, type EventPublisher } from './shared/outbox.js';
import { countPendingOutboxes } from './shared/outbox.js';
import { closeQueues, createQueues } from './shared/queues.js';
import { keyNamespace, type RedisClient } from './shared/redis.js';
import { SlidingWindowLimiter } from './shared/sliding-window.js';
import './shared/zod-messages.js';
import { traceRequests } from './telemetry/requests.js';
import { tracingStarted } from './telemetry/state.js';
import type { Repositories } from './repositories.js';
import type { Config } from './shared/config.js';
import type { Resolver } from './shared/target-guard.js';
import type { Db } from 'mongodb';
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface AppDeps {
  config: Config;
  db: Db;
  /** Request-path Redis client: fails fast while disconnected (see shared/redis.ts). */
  redis: RedisClient;
  logger?: Logger;
  /** Fast-path publisher of recorded events; without one the relay delivers them. */
  publisher?: EventPublisher;
  /** DNS for the webhook SSRF guard; tests inject their own. */
  resolver?: Resolver;
}

/** The container's services, and the web's own: request accounting, rate limits, the auth failure throttle. */
function createWebServices(deps: AppDeps, container: Container, logger: Logger) {
  const prefix = `${keyNamespace(deps.config.QUEUE_PREFIX)}:`;
  const { changes } = container.services;
  return {
    ...container.services,
    lastUsed: new LastUsedTracker(container.repos.apiKeys, logger),
    rateLimiter: new SlidingWindowLimiter(
      deps.redis,
      {
        max: deps.config.RATE_LIMIT_MAX,
        windowSeconds: deps.config.RATE_LIMIT_WINDOW_SECONDS,
        keyPrefix: `${prefix}rl:`,
      },
      logger,
    ),
    failedAuthThrottle: new FailedAuthThrottle(
      new SlidingWindowLimiter(deps.redis, { max: 20, windowSeconds: 60, keyPrefix: `${prefix}authfail:` }, logger),
      changes.access,
    ),
  };
}

export type Services = ReturnType<typeof createWebServices>;

declare module 'fastify' {
  interface FastifyInstance {
    deps: AppDeps;
    repos: Repositories;
    services: Services;
    /** Every route as registered, for checks such as "each route declares its responses". */
    routeTable: RouteOptions[];
  }
}

export type App = FastifyInstance<
  RawServerDefault,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  ZodTypeProvider
>;

const BODY_LIMIT_BYTES = 1024 * 1024;
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the web app; every dependency is passed in so tests can bring their own database and Redis. */
export async function buildApp(deps: AppDeps): Promise<App> {
  const logger = deps.logger ?? createLogger(deps.config.LOG_LEVEL);
  // Fastify infers its logger type from loggerInstance; App is typed with the base logger.
  const app = Fastify<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger>({
    loggerInstance: logger,
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    // While closing, a request that reached an open connection is served (with Connection: close, below)
    // instead of a bare 503: it was sent before we stopped accepting, and new connections are refused.
    return503OnClosing: false,
    trustProxy: trustProxyOption(deps.config.TRUST_PROXY),
    ...serverTimeoutOptions(deps.config),
    clientErrorHandler: answerClientError,
    // The reference renderers live at /docs/ and /docs/admin/; serve them without the slash too instead of redirecting.
    rewriteUrl: (req) => (req.url === '/docs' || req.url === '/docs/admin' ? `${req.url}/` : (req.url ?? '/')),
    // One log line per request is written in onResponse instead (with company and key ids).
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: 'idle',
    // Above Node's 16 KiB header limit, so any id fits: an over-long one still reaches its route
    // (after authentication, with its rate-limit slot) and is a plain 404 there.
    routerOptions: { maxParamLength: 65_536 },
    frameworkErrors: handleFrameworkError,
  }).withTypeProvider<ZodTypeProvider>();

  // Stage 1: infrastructure.
  holdHeadersDeadline(app.server, {
    headersTimeoutMs: deps.config.HEADERS_TIMEOUT_MS,
    keepAliveTimeoutMs: deps.config.KEEP_ALIVE_TIMEOUT_MS,
  });
  // The request span first, so every hook after it (authentication, the rate limit) runs within it.
  if (tracingStarted()) traceRequests(app);
  app.decorate('deps', deps);
  const routeTable: RouteOptions[] = [];
  app.addHook('onRoute', (route) => void routeTable.push(route));
  app.decorate('routeTable', routeTable);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(zodResponseSerializerCompiler);
  // JSON only (DECISIONS.md section 1): anything else with a body is 415. An empty body with a JSON
  // content type (common on DELETE and bodiless POSTs) is no body, not invalid JSON. Absurdly wide or
  // deep bodies are refused from the text, before parsing builds them (DECISIONS.md section 12.4).
  app.removeContentTypeParser(['text/plain', 'application/json']);
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    const oversize = oversizeJsonProblem(text);
    if (oversize) return done(new ValidationError([oversize]), undefined);
    void parseJson(request, text, done);
  });
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  registerErrorHandling(app);
  registerRequestObservation(app);
  registerDeprecationHeaders(app);

  // Queue handles for the services, the board and the depth metrics; outages surface there, never as a crash.
  const queues = createQueues(QUEUE_NAMES, { connection: deps.redis, prefix: deps.config.QUEUE_PREFIX });
  const untrack = [trackQueues(Object.values(queues)), trackOutbox(() => countPendingOutboxes(deps.db))];

  // Stage 2: shared decorators: every repository and service, built once (src/container.ts).
  const container = createContainer({
    config: deps.config,
    db: deps.db,
    redis: deps.redis,
    queues,
    logger,
    publisher: () => deps.publisher ?? relayOnlyPublisher,
    resolver: deps.resolver,
  });
  const services = createWebServices(deps, container, logger);
  app.decorate('repos', container.repos);
  app.decorate('services', services);
  // Graceful close: requests in flight when SIGTERM arrives finish, but their keep-alive connections
  // must not linger afterwards, or the server would wait on them until the client times out.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    services.feedWaiters.close(); // a feed request waiting for events answers now
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  app.addHook('onClose', async () => {
    untrack.forEach((stop) => stop());
    await services.lastUsed.close();
    container.close();
    await closeQueues(queues);
  });

  // Stage 3: routes, with the OpenAPI document collecting them as they register.
  await registerOpenApi(app);
  await app.register(opsRoutes);
  registerOpenApiRoutes(app);
  registerErrorReference(app);
  await registerQueueBoard(app, Object.values(queues));
  await registerReferencePages(app);
  await app.register(adminApi, { prefix: '/v1/admin' });
  await app.register(extApi, { prefix: '/v1/ext' });

  return app;
}
