import { createExtAuthHook } from '../auth/ext-auth.js';
import { eventsRoutes } from '../events/routes.js';
import { exportRoutes } from '../export/routes.js';
import { historyRoutes } from '../history/routes.js';
import { hooksRoutes } from '../hooks/routes.js';
import { answerUnknownRoute } from '../http/error-handler.js';
import { registerIdempotency } from '../idempotency/plugin.js';
import { itemsRoutes } from '../items/routes.js';
import { pipelinesRoutes } from '../pipelines/routes.js';
import { tasksRoutes } from '../tasks/routes.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

/** Everything under `/v1/ext/`: one auth hook and idempotency for all routes, then the features. */
export const extApi: FastifyPluginAsyncZod = async (app) => {
  const authenticate = createExtAuthHook(app.services);
  app.addHook('onRequest', authenticate);
  // An unknown path under /v1/ext/ passes the onRequest auth hook above like any other request
  // (401 before 404, one rate-limit slot), then gets 404.
  app.setNotFoundHandler(answerUnknownRoute);
  registerIdempotency(app, app.repos.idempotency);
  await app.register(pipelinesRoutes);
  await app.register(itemsRoutes);
  await app.register(tasksRoutes);
  await app.register(hooksRoutes);
  await app.register(eventsRoutes);
  await app.register(historyRoutes);
  await app.register(exportRoutes);
};
