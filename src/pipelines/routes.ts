import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf } from '../auth/ext-auth.js';
import { errorResponses, EXT_ERRORS } from '../http/responses.js';
import { NotFoundError } from '../shared/errors.js';
import { toPipelineResponse } from './repository.js';
import { pipelineSchema } from './schemas.js';

const tags = ['pipelines'];

/** Read-only Pipelines API for integrators (DECISIONS.md section 7). */
export const pipelinesRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get('/pipelines', {
    config: { scope: 'items:read' },
    schema: { tags, summary: 'List pipelines', response: { 200: z.array(pipelineSchema), ...errorResponses(...EXT_ERRORS) } },
  }, async (request) => {
    return (await app.repos.pipelines.list(authOf(request).companyId)).map(toPipelineResponse);
  });

  app.get('/pipelines/:pipeline_id', {
    config: { scope: 'items:read' },
    schema: {
      tags,
      summary: 'Get a pipeline with its stages, statuses and custom fields',
      params: z.object({ pipeline_id: z.string() }),
      response: { 200: pipelineSchema, ...errorResponses(...EXT_ERRORS, 404) },
    },
  }, async (request) => {
    const pipeline = await app.repos.pipelines.findById(authOf(request).companyId, request.params.pipeline_id);
    if (!pipeline) throw new NotFoundError('Pipeline');
    return toPipelineResponse(pipeline);
  });
};
