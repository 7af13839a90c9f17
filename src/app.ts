import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type RawServerDefault } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { Redis } from 'ioredis';
import type { Db } from 'mongodb';
import { adminApi } from './admin/plugin.js';
import { ApiKeyAuthenticator } from './auth/authenticator.js';
import { FailedAuthThrottle } from './auth/failed-auth-throttle.js';
import { LastUsedTracker } from './auth/last-used.js';
import type { Config } from './config.js';
import { registerErrorHandling } from './http/error-handler.js';
import { extApi } from './http/ext-api.js';
import { opsRoutes } from './ops/routes.js';
import { SlidingWindowLimiter } from './ratelimit/sliding-window.js';
import { createRepositories, type Repositories } from './repositories.js';
import { createDomainServices } from './services.js';
import { createLogger, type Logger } from './shared/logger.js';
import { relayOnlyPublisher, type EventPublisher } from './events/publisher.js';
import { TargetGuard, type Resolver } from './hooks/target-guard.js';

export interface AppDeps {
  config: Config;
  db: Db;
  /** Request-path Redis client: fails fast while disconnected (see shared/redis.ts). */
  redis: Redis;
  logger?: Logger;
  /** Fast-path publisher of recorded events; without one the relay delivers them. */
  publisher?: EventPublisher;
  /** DNS for the webhook SSRF guard; tests inject their own. */
  resolver?: Resolver;
}

function createServices(deps: AppDeps, repos: Repositories, logger: Logger) {
  const prefix = `${deps.config.QUEUE_PREFIX}:`;
  const publisher = deps.publisher ?? relayOnlyPublisher;
  return {
    publisher,
    ...createDomainServices(deps.db, repos, publisher),
    targetGuard: new TargetGuard(deps.config.HOOK_ALLOW_PRIVATE_TARGETS, deps.resolver),
    authenticator: new ApiKeyAuthenticator(repos.apiKeys, repos.companies),
    lastUsed: new LastUsedTracker(repos.apiKeys, logger),
    rateLimiter: new SlidingWindowLimiter(
      deps.redis,
      { max: deps.config.RATE_LIMIT_MAX, windowSeconds: deps.config.RATE_LIMIT_WINDOW_SECONDS, keyPrefix: `${prefix}rl:` },
      logger,
    ),
    failedAuthThrottle: new FailedAuthThrottle(
      new SlidingWindowLimiter(deps.redis, { max: 20, windowSeconds: 60, keyPrefix: `${prefix}authfail:` }, logger),
    ),
  };
}

export type Services = ReturnType<typeof createServices>;

declare module 'fastify' {
  interface FastifyInstance {
    deps: AppDeps;
    repos: Repositories;
    services: Services;
  }
}

export type App = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, ZodTypeProvider>;

const BODY_LIMIT_BYTES = 1024 * 1024;
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the web app; every dependency is passed in so tests can bring their own database and Redis. */
export async function buildApp(deps: AppDeps): Promise<App> {
  const logger = deps.logger ?? createLogger(deps.config.LOG_LEVEL);
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  }).withTypeProvider<ZodTypeProvider>();

  // Stage 1: infrastructure.
  app.decorate('deps', deps);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // JSON only (DECISIONS.md section 1): anything else with a body is 415.
  app.removeContentTypeParser('text/plain');
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  registerErrorHandling(app);

  // Stage 2: shared decorators.
  const repos = createRepositories(deps.db);
  const services = createServices(deps, repos, logger);
  app.decorate('repos', repos);
  app.decorate('services', services);
  app.addHook('onClose', async () => {
    await services.lastUsed.close();
  });

  // Stage 3: routes.
  await app.register(opsRoutes);
  await app.register(adminApi, { prefix: '/v1/admin' });
  await app.register(extApi, { prefix: '/v1/ext' });

  return app;
}
