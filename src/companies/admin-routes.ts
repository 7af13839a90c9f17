import { z } from 'zod';
import { companySchema, createCompanyBody, toCompanyResponse, updateCompanyBody } from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const tags = ['admin'];

export const companiesAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/companies',
    {
      schema: { tags, body: createCompanyBody, response: { 201: companySchema } },
    },
    async (request, reply) => {
      const company = await app.services.companies.create(request.body);
      return reply.code(201).send(toCompanyResponse(company));
    },
  );

  app.get(
    '/companies/:company_id',
    {
      schema: { tags, params: companyParams, response: { 200: companySchema } },
    },
    async (request) => {
      return toCompanyResponse(await app.services.companies.get(request.params.company_id));
    },
  );

  app.patch(
    '/companies/:company_id',
    {
      schema: {
        tags,
        params: companyParams,
        body: updateCompanyBody,
        response: { 200: companySchema },
      },
    },
    async (request) => {
      return toCompanyResponse(await app.services.companies.update(request.params.company_id, request.body));
    },
  );
};
