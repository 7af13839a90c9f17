import { z } from 'zod';
import { AppError } from '../shared/errors.js';
import { metricsRegistry } from '../shared/metrics.js';
import { pingMongo } from '../shared/mongo.js';
import { isRedisReady } from '../shared/redis.js';
import { bearerMatches } from '../shared/secrets.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const dependencyState = z.enum(['ok', 'down']);
const readinessSchema = z.object({
  mongo: dependencyState,
  redis: dependencyState,
});

/** Operations endpoints (DECISIONS.md section 11): outside /v1/ext/, no API key. */
export const opsRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/healthz',
    { schema: { hide: true, response: { 200: z.object({ status: z.literal('ok') }) } } },
    async () => ({
      status: 'ok' as const,
    }),
  );

  // DECISIONS.md section 12.4: with METRICS_PORT the metrics leave the API port (served by
  // startMetricsListener); without it, METRICS_TOKEN (when set) guards them here.
  const { METRICS_PORT, METRICS_TOKEN } = app.deps.config;
  if (METRICS_PORT === undefined) {
    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      if (METRICS_TOKEN !== undefined && !bearerMatches(request.headers.authorization, METRICS_TOKEN)) {
        throw new AppError(
          401,
          'unauthorized',
          'Unauthorized',
          'A valid metrics bearer token is required',
          {},
          {
            'www-authenticate': 'Bearer',
          },
        );
      }
      reply.type(metricsRegistry.contentType);
      return metricsRegistry.metrics();
    });
  }

  // Ready while MongoDB answers; Redis is reported but does not make the process unready,
  // because the API keeps serving through a Redis outage (DECISIONS.md section 4).
  app.get(
    '/readyz',
    { schema: { hide: true, response: { 200: readinessSchema, 503: readinessSchema } } },
    async (request, reply) => {
      const [mongoUp, redisUp] = await Promise.all([pingMongo(app.deps.db), isRedisReady(app.deps.redis)]);
      const mongo = mongoUp ? 'ok' : 'down';
      const redis = redisUp ? 'ok' : 'down';
      const body = { mongo, redis } as const;
      if (mongo === 'down') reply.code(503).header('retry-after', '5');
      return body;
    },
  );
};
