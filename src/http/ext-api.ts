import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { createExtAuthHook } from '../auth/ext-auth.js';
import { pipelinesRoutes } from '../pipelines/routes.js';
import { itemsRoutes } from '../items/routes.js';
import { tasksRoutes } from '../tasks/routes.js';
import { hooksRoutes } from '../hooks/routes.js';
import { registerIdempotency } from '../idempotency/plugin.js';

/** Everything under `/v1/ext/`: one auth hook and idempotency for all routes, then the features. */
export const extApi: FastifyPluginAsyncZod = async (app) => {
  app.addHook('onRequest', createExtAuthHook(app.services));
  registerIdempotency(app, app.repos.idempotency);
  await app.register(pipelinesRoutes);
  await app.register(itemsRoutes);
  await app.register(tasksRoutes);
  await app.register(hooksRoutes);
};
