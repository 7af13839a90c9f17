import { apiKeysAdminRoutes } from '../auth/api-keys.admin-routes.js';
import { failedAuthRefusal } from '../auth/failed-auth-throttle.js';
import { automationsAdminRoutes } from '../automations/admin-routes.js';
import { companiesAdminRoutes } from '../companies/admin-routes.js';
import { erasuresAdminRoutes } from '../erasure/admin-routes.js';
import { hooksAdminRoutes } from '../hooks/admin-routes.js';
import { answerUnknownRoute } from '../http/error-handler.js';
import { pipelinesAdminRoutes } from '../pipelines/admin-routes.js';
import { AppError } from '../shared/errors.js';
import { bearerMatches } from '../shared/secrets.js';
import { usersAdminRoutes } from '../users/admin-routes.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

/** Constant-time check of `Authorization: Bearer <ADMIN_TOKEN>`. */
export function isAdminToken(header: string | undefined, adminToken: string | undefined): boolean {
  return bearerMatches(header, adminToken);
}

/**
 * The admin API stands in for the product UI's settings (DECISIONS.md section 10). An address over the
 * failed-auth limit is refused (429) before its token is compared, so a right guess is not told apart;
 * a wrong token counts as a failure, a request without any does not (DECISIONS.md 13.4).
 */
export const adminApi: FastifyPluginAsyncZod = async (app) => {
  app.addHook('onRequest', async (request) => {
    const throttle = app.services.failedAuthThrottle;
    const blocked = throttle.blockedFor(request.ip);
    if (blocked !== undefined) throw failedAuthRefusal(blocked);
    const header = request.headers.authorization;
    if (isAdminToken(header, app.deps.config.ADMIN_TOKEN)) return;
    if (header !== undefined) {
      const wait = await throttle.recordFailure(request.ip);
      if (wait !== undefined) throw failedAuthRefusal(wait);
    }
    throw new AppError(401, 'unauthorized', 'Unauthorized', 'A valid admin bearer token is required');
  });
  // An unknown admin path passes the token check above too (401 before 404).
  app.setNotFoundHandler(answerUnknownRoute);
  await app.register(companiesAdminRoutes);
  await app.register(usersAdminRoutes);
  await app.register(pipelinesAdminRoutes);
  await app.register(apiKeysAdminRoutes);
  await app.register(automationsAdminRoutes);
  await app.register(hooksAdminRoutes);
  await app.register(erasuresAdminRoutes);
};
