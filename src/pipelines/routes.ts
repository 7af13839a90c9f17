import { z } from 'zod';
import { authOf } from '../contracts/auth-context.js';
import { pipelineSchema } from '../contracts/pipelines.js';
import { idPageQuery, pageByCreation, setNextPageHeaders } from '../shared/pagination.js';
import { toPipelineResponse } from './repository.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const tags = ['pipelines'];

/** Read-only Pipelines API for integrators (DECISIONS.md section 7). */
export const pipelinesRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/pipelines',
    {
      config: { scope: 'items:read' },
      schema: {
        tags,
        summary: 'List pipelines',
        querystring: idPageQuery,
        response: { 200: z.array(pipelineSchema) },
      },
    },
    async (request, reply) => {
      const companyId = authOf(request).companyId;
      const page = await pageByCreation(
        await app.services.cursors(),
        `pipelines:${companyId}`,
        request.query,
        (afterId, limit) => app.services.pipelines.listCursor(companyId, afterId, limit),
      );
      setNextPageHeaders(request, reply, page.nextCursor);
      return page.rows.map(toPipelineResponse);
    },
  );

  app.get(
    '/pipelines/:pipeline_id',
    {
      config: { scope: 'items:read' },
      schema: {
        tags,
        summary: 'Get a pipeline with its stages, statuses and custom fields',
        params: z.object({ pipeline_id: z.string() }),
        response: { 200: pipelineSchema },
      },
    },
    async (request) => {
      return toPipelineResponse(
        await app.services.pipelines.getCached(authOf(request).companyId, request.params.pipeline_id),
      );
    },
  );
};
