import { z } from 'zod';
import { createPipelineBody, pipelineSchema, updatePipelineBody } from '../contracts/pipelines.js';
import { requireCompany } from '../http/require-company.js';
import { toPipelineResponse } from './repository.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const pipelineParams = companyParams.extend({ pipeline_id: z.string() });
const tags = ['admin'];

export const pipelinesAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/companies/:company_id/pipelines',
    {
      schema: {
        tags,
        params: companyParams,
        body: createPipelineBody,
        response: { 201: pipelineSchema },
      },
    },
    async (request, reply) => {
      await requireCompany(app, request.params.company_id);
      const pipeline = await app.services.pipelines.create(request.params.company_id, request.body);
      return reply.code(201).send(toPipelineResponse(pipeline));
    },
  );

  app.get(
    '/companies/:company_id/pipelines',
    {
      schema: { tags, params: companyParams, response: { 200: z.array(pipelineSchema) } },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      return (await app.services.pipelines.list(request.params.company_id)).map(toPipelineResponse);
    },
  );

  app.get(
    '/companies/:company_id/pipelines/:pipeline_id',
    {
      schema: { tags, params: pipelineParams, response: { 200: pipelineSchema } },
    },
    async (request) => {
      return toPipelineResponse(
        await app.services.pipelines.get(request.params.company_id, request.params.pipeline_id),
      );
    },
  );

  app.patch(
    '/companies/:company_id/pipelines/:pipeline_id',
    {
      schema: {
        tags,
        params: pipelineParams,
        body: updatePipelineBody,
        response: { 200: pipelineSchema },
      },
    },
    async (request) => {
      const { company_id: companyId, pipeline_id: pipelineId } = request.params;
      return toPipelineResponse(await app.services.pipelines.update(companyId, pipelineId, request.body));
    },
  );
};
