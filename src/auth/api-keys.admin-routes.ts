import { z } from 'zod';
import { requireCompany } from '../admin/require-company.js';
import { errorResponses, noContent } from '../http/responses.js';
import { NotFoundError, ValidationError } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { toIso } from '../shared/time.js';
import {
  apiKeySchema,
  createApiKeyBody,
  createdApiKeySchema,
  renameApiKeyBody,
  toApiKeyResponse,
} from './api-keys.schemas.js';
import { generateApiKey } from './key-material.js';
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
        response: { 201: createdApiKeySchema, ...errorResponses(400, 401, 404) },
      },
    },
    async (request, reply) => {
      const companyId = request.params.company_id;
      await requireCompany(app, companyId);
      const creator = await app.repos.users.findById(companyId, request.body.created_by);
      if (!creator) throw ValidationError.single('created_by', 'is not a user of this company');
      const material = generateApiKey();
      const doc = {
        _id: newId('apiKey'),
        company_id: companyId,
        name: request.body.name,
        prefix: material.displayPrefix,
        key_hash: material.hash,
        scopes: request.body.scopes,
        expires_at: request.body.expires_at ?? null,
        created_by: creator._id,
        created_at: new Date(),
        last_used_at: null,
        revoked_at: null,
      };
      await app.repos.apiKeys.insert(doc);
      return reply.code(201).send({
        key_id: doc._id,
        name: doc.name,
        scopes: doc.scopes,
        expires_at: toIso(doc.expires_at),
        created_by: doc.created_by,
        created_at: toIso(doc.created_at),
        key: material.value,
      });
    },
  );

  app.get(
    '/companies/:company_id/api-keys',
    {
      schema: { tags, params: companyParams, response: { 200: z.array(apiKeySchema), ...errorResponses(401, 404) } },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      // This process's uses are written in batches; write them now so the list is current (other web
      // processes' uses arrive within their next flush, every 5 s).
      await app.services.lastUsed.flush();
      return (await app.repos.apiKeys.list(request.params.company_id)).map(toApiKeyResponse);
    },
  );

  app.patch(
    '/companies/:company_id/api-keys/:key_id',
    {
      schema: {
        tags,
        params: keyParams,
        body: renameApiKeyBody,
        response: { 200: apiKeySchema, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const key = await app.repos.apiKeys.rename(request.params.company_id, request.params.key_id, request.body.name);
      if (!key) throw new NotFoundError('API key');
      return toApiKeyResponse(key);
    },
  );

  app.delete(
    '/companies/:company_id/api-keys/:key_id',
    {
      schema: { tags, params: keyParams, response: { 204: noContent, ...errorResponses(401, 404) } },
    },
    async (request, reply) => {
      const revoked = await app.repos.apiKeys.revoke(request.params.company_id, request.params.key_id);
      if (!revoked) throw new NotFoundError('API key');
      await app.services.authenticator.keyChanged(request.params.key_id);
      return reply.code(204).send(null);
    },
  );
};
