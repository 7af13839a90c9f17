import { z } from 'zod';
import { requireCompany } from '../http/require-company.js';
import { noContent } from '../http/responses.js';
import { toIso } from '../shared/time.js';
import {
  apiKeySchema,
  createApiKeyBody,
  createdApiKeySchema,
  renameApiKeyBody,
  toApiKeyResponse,
} from './api-keys.schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const keyParams = companyParams.extend({ key_id: z.string() });
const tags = ['admin'];

export const apiKeysAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/companies/:company_id/api-keys',
    {
      schema: {
        tags,
        params: companyParams,
        body: createApiKeyBody,
        response: { 201: createdApiKeySchema },
      },
    },
    async (request, reply) => {
      const companyId = request.params.company_id;
      await requireCompany(app, companyId);
      const { doc, key } = await app.services.apiKeys.create(companyId, request.body);
      return reply.code(201).send({
        key_id: doc._id,
        name: doc.name,
        scopes: doc.scopes,
        expires_at: toIso(doc.expires_at),
        created_by: doc.created_by,
        created_at: toIso(doc.created_at),
        key,
      });
    },
  );

  app.get(
    '/companies/:company_id/api-keys',
    {
      schema: { tags, params: companyParams, response: { 200: z.array(apiKeySchema) } },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      // This process's uses are written in batches; write them now so the list is current (other web
      // processes' uses arrive within their next flush, every 5 s).
      await app.services.lastUsed.flush();
      return (await app.services.apiKeys.list(request.params.company_id)).map(toApiKeyResponse);
    },
  );

  app.patch(
    '/companies/:company_id/api-keys/:key_id',
    {
      schema: {
        tags,
        params: keyParams,
        body: renameApiKeyBody,
        response: { 200: apiKeySchema },
      },
    },
    async (request) => {
      const { company_id: companyId, key_id: keyId } = request.params;
      return toApiKeyResponse(await app.services.apiKeys.rename(companyId, keyId, request.body.name));
    },
  );

  app.delete(
    '/companies/:company_id/api-keys/:key_id',
    {
      schema: { tags, params: keyParams, response: { 204: noContent } },
    },
    async (request, reply) => {
      await app.services.apiKeys.revoke(request.params.company_id, request.params.key_id);
      return reply.code(204).send(null);
    },
  );
};
