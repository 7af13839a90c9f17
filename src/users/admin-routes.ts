import { z } from 'zod';
import { requireCompany } from '../http/require-company.js';
import { createUserBody, toUserResponse, userSchema } from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const tags = ['admin'];

export const usersAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/companies/:company_id/users',
    {
      schema: {
        tags,
        params: companyParams,
        body: createUserBody,
        response: { 201: userSchema },
      },
    },
    async (request, reply) => {
      await requireCompany(app, request.params.company_id);
      const user = await app.services.users.create(request.params.company_id, request.body);
      return reply.code(201).send(toUserResponse(user));
    },
  );

  app.get(
    '/companies/:company_id/users',
    {
      schema: { tags, params: companyParams, response: { 200: z.array(userSchema) } },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      return (await app.services.users.list(request.params.company_id)).map(toUserResponse);
    },
  );
};
