import { z } from 'zod';
import { requireCompany } from '../admin/require-company.js';
import { errorResponses, noContent } from '../http/responses.js';
import { NotFoundError, ValidationError, type FieldProblem } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { toAutomationResponse, toRunResponse } from './repository.js';
import {
  automationRunSchema,
  automationSchema,
  createAutomationBody,
  listRunsQuery,
  updateAutomationBody,
  type AutomationAction,
  type AutomationConditions,
} from './schemas.js';
import type { FastifyInstance } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const automationParams = companyParams.extend({ automation_id: z.string() });
const tags = ['admin'];

/** References in conditions and actions must resolve in the automation's own company. */
async function checkReferences(
  app: FastifyInstance,
  companyId: string,
  conditions: AutomationConditions | null | undefined,
  actions: AutomationAction[] | undefined,
): Promise<void> {
  const problems: FieldProblem[] = [];
  if (conditions?.assigned_to && !(await app.repos.users.findById(companyId, conditions.assigned_to))) {
    problems.push({ path: 'conditions.assigned_to', message: 'is not a user of this company' });
  }
  const pipelines = actions?.some((action) => action.type === 'update_item')
    ? await app.repos.pipelines.list(companyId)
    : [];
  for (const [index, action] of (actions ?? []).entries()) {
    if (
      action.type === 'create_task' &&
      action.assigned_to &&
      !(await app.repos.users.findById(companyId, action.assigned_to))
    ) {
      problems.push({ path: `actions.${index}.assigned_to`, message: 'is not a user of this company' });
    }
    if (action.type === 'update_item') {
      if (
        action.stage_id &&
        !pipelines.some((pipeline) => pipeline.stages.some((stage) => stage.stage_id === action.stage_id))
      ) {
        problems.push({ path: `actions.${index}.stage_id`, message: 'is not a stage of this company' });
      }
      if (
        action.status_id &&
        !pipelines.some((pipeline) => pipeline.statuses.some((status) => status.status_id === action.status_id))
      ) {
        problems.push({ path: `actions.${index}.status_id`, message: 'is not a status of this company' });
      }
    }
    if (action.type === 'webhook') {
      const problem = await app.services.targetGuard.problemWithUrl(action.url);
      if (problem) problems.push({ path: `actions.${index}.url`, message: problem });
    }
  }
  if (problems.length > 0) throw new ValidationError(problems);
}

export const automationsAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/companies/:company_id/automations',
    {
      schema: {
        tags,
        params: companyParams,
        body: createAutomationBody,
        response: { 201: automationSchema, ...errorResponses(400, 401, 404) },
      },
    },
    async (request, reply) => {
      const companyId = request.params.company_id;
      await requireCompany(app, companyId);
      await checkReferences(app, companyId, request.body.conditions, request.body.actions);
      const now = new Date();
      const doc = {
        _id: newId('automation'),
        company_id: companyId,
        ...request.body,
        conditions: request.body.conditions ?? null,
        created_at: now,
        updated_at: now,
      };
      await app.repos.automations.insert(doc);
      return reply.code(201).send(toAutomationResponse(doc));
    },
  );

  app.get(
    '/companies/:company_id/automations',
    {
      schema: {
        tags,
        params: companyParams,
        response: { 200: z.array(automationSchema), ...errorResponses(401, 404) },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      return (await app.repos.automations.list(request.params.company_id)).map(toAutomationResponse);
    },
  );

  app.patch(
    '/companies/:company_id/automations/:automation_id',
    {
      schema: {
        tags,
        params: automationParams,
        body: updateAutomationBody,
        response: { 200: automationSchema, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { company_id: companyId, automation_id: automationId } = request.params;
      if (!(await app.repos.automations.findById(companyId, automationId))) throw new NotFoundError('Automation');
      await checkReferences(app, companyId, request.body.conditions, request.body.actions);
      const updated = await app.repos.automations.update(companyId, automationId, request.body);
      if (!updated) throw new NotFoundError('Automation');
      return toAutomationResponse(updated);
    },
  );

  app.delete(
    '/companies/:company_id/automations/:automation_id',
    {
      schema: { tags, params: automationParams, response: { 204: noContent, ...errorResponses(401, 404) } },
    },
    async (request, reply) => {
      if (!(await app.repos.automations.remove(request.params.company_id, request.params.automation_id)))
        throw new NotFoundError('Automation');
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
        response: { 200: z.object({ secret: z.string() }), ...errorResponses(401, 404) },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      return { secret: await app.repos.webhookSecrets.forCompany(request.params.company_id) };
    },
  );

  app.get(
    '/companies/:company_id/automation-runs',
    {
      schema: {
        tags,
        params: companyParams,
        querystring: listRunsQuery,
        response: { 200: z.array(automationRunSchema), ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      const runs = await app.repos.automations.listRuns(
        request.params.company_id,
        request.query.automation_id,
        request.query.limit,
      );
      return runs.map(toRunResponse);
    },
  );
};
