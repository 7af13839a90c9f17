import { z } from 'zod';
import { requireCompany } from '../http/require-company.js';
import { noContent } from '../http/responses.js';
import { toAutomationResponse, toRunResponse } from './repository.js';
import {
  automationRunSchema,
  automationSchema,
  createAutomationBody,
  listRunsQuery,
  updateAutomationBody,
} from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const automationParams = companyParams.extend({ automation_id: z.string() });
const tags = ['admin'];

export const automationsAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/companies/:company_id/automations',
    {
      schema: {
        tags,
        params: companyParams,
        body: createAutomationBody,
        response: { 201: automationSchema },
      },
    },
    async (request, reply) => {
      const companyId = request.params.company_id;
      await requireCompany(app, companyId);
      const doc = await app.services.automations.create(companyId, request.body);
      return reply.code(201).send(toAutomationResponse(doc));
    },
  );

  app.get(
    '/companies/:company_id/automations',
    {
      schema: {
        tags,
        params: companyParams,
        response: { 200: z.array(automationSchema) },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      return (await app.services.automations.list(request.params.company_id)).map(toAutomationResponse);
    },
  );

  app.patch(
    '/companies/:company_id/automations/:automation_id',
    {
      schema: {
        tags,
        params: automationParams,
        body: updateAutomationBody,
        response: { 200: automationSchema },
      },
    },
    async (request) => {
      const { company_id: companyId, automation_id: automationId } = request.params;
      return toAutomationResponse(await app.services.automations.update(companyId, automationId, request.body));
    },
  );

  app.delete(
    '/companies/:company_id/automations/:automation_id',
    {
      schema: { tags, params: automationParams, response: { 204: noContent } },
    },
    async (request, reply) => {
      await app.services.automations.remove(request.params.company_id, request.params.automation_id);
      return reply.code(204).send(null);
    },
  );

  // Automation `webhook` actions are signed with one secret per company; receivers need it to verify.
  app.get(
    '/companies/:company_id/automation-webhook-secret',
    {
      schema: {
        tags,
        summary: 'The whsec_ secret that signs this company automation webhook deliveries',
        params: companyParams,
        response: { 200: z.object({ secret: z.string() }) },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      return { secret: await app.services.automations.webhookSecret(request.params.company_id) };
    },
  );

  app.get(
    '/companies/:company_id/automation-runs',
    {
      schema: {
        tags,
        params: companyParams,
        querystring: listRunsQuery,
        response: { 200: z.array(automationRunSchema) },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      const runs = await app.services.automations.listRuns(
        request.params.company_id,
        request.query.automation_id,
        request.query.limit,
      );
      return runs.map(toRunResponse);
    },
  );
};
