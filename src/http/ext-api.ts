import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { createExtAuthHook } from '../auth/ext-auth.js';
import { pipelinesRoutes } from '../pipelines/routes.js';

/** Everything under `/v1/ext/`: one auth hook for all routes, then the features. */
export const extApi: FastifyPluginAsyncZod = async (app) => {
  app.addHook('onRequest', createExtAuthHook(app.services));
  await app.register(pipelinesRoutes);
};
