import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { apiKeysAdminRoutes } from '../auth/api-keys.admin-routes.js';
import { companiesAdminRoutes } from '../companies/admin-routes.js';
import { pipelinesAdminRoutes } from '../pipelines/admin-routes.js';
import { AppError, NotFoundError } from '../shared/errors.js';
import { answerUnknownRoute } from '../http/error-handler.js';
import { usersAdminRoutes } from '../users/admin-routes.js';
import { automationsAdminRoutes } from '../automations/admin-routes.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Constant-time check of `Authorization: Bearer <ADMIN_TOKEN>`. */
export function isAdminToken(header: string | undefined, adminToken: string | undefined): boolean {
  const match = header ? /^bearer\s+(.+)$/i.exec(header) : null; // the scheme name is case-insensitive
  if (!adminToken || !match) return false;
  return timingSafeEqual(digest(match[1].trim()), digest(adminToken));
}

/** The admin API stands in for the product UI's settings (DECISIONS.md section 10). */
export const adminApi: FastifyPluginAsyncZod = async (app) => {
  app.addHook('onRequest', async (request) => {
    if (!isAdminToken(request.headers.authorization, app.deps.config.ADMIN_TOKEN)) {
      throw new AppError(401, 'unauthorized', 'Unauthorized', 'A valid admin bearer token is required');
    }
  });
  // An unknown admin path passes the token check above too (401 before 404).
  app.setNotFoundHandler(answerUnknownRoute);
  await app.register(companiesAdminRoutes);
  await app.register(usersAdminRoutes);
  await app.register(pipelinesAdminRoutes);
  await app.register(apiKeysAdminRoutes);
  await app.register(automationsAdminRoutes);
};

/** Loads the company named in an admin path, 404 when it does not exist. */
export async function requireCompany(app: { repos: { companies: { findById(id: string): Promise<unknown> } } }, companyId: string) {
  const company = await app.repos.companies.findById(companyId);
  if (!company) throw new NotFoundError('Company');
  return company;
}
