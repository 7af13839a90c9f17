import { z } from 'zod';
import { requireCompany } from '../http/require-company.js';
import { noContent } from '../http/responses.js';
import { adminHookSchema, toAdminHookResponse } from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const hookParams = companyParams.extend({ hook_id: z.string() });
const tags = ['admin'];
/** As many as the admin API's other lists show (a company has at most HOOK_MAX_PER_COMPANY hooks). */
const LISTED_HOOKS = 1_000;

/** A company's REST hooks as its administrator sees them (DECISIONS.md section 13.4): never a secret. */
export const hooksAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/companies/:company_id/hooks',
    {
      schema: {
        tags,
        summary: "List a company's REST hooks (without secrets), in creation order, with the key that created each",
        params: companyParams,
        response: { 200: z.array(adminHookSchema) },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      const hooks = await app.services.hooks.listOf(request.params.company_id, undefined, LISTED_HOOKS);
      return hooks.map((hook) => toAdminHookResponse(hook));
    },
  );

  app.get(
    '/companies/:company_id/hooks/:hook_id',
    {
      schema: {
        tags,
        summary: 'One REST hook of a company (without its secret)',
        params: hookParams,
        response: { 200: adminHookSchema },
      },
    },
    async (request) => {
      const { company_id: companyId, hook_id: hookId } = request.params;
      return toAdminHookResponse(await app.services.hooks.get(companyId, hookId));
    },
  );

  app.delete(
    '/companies/:company_id/hooks/:hook_id',
    {
      schema: {
        tags,
        summary: 'Delete a REST hook of a company and its delivery records; nothing more is sent to it',
        params: hookParams,
        response: { 204: noContent },
      },
    },
    async (request, reply) => {
      await app.services.hooks.remove(request.params.company_id, request.params.hook_id);
      return reply.code(204).send(null);
    },
  );
};
