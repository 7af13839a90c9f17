import { z } from 'zod';
import { authOf } from '../contracts/auth-context.js';
import { createTaskBody, listTasksQuery, taskSchema, updateTaskBody } from '../contracts/tasks.js';
import { wellFormedFields } from '../http/error-handler.js';
import { noContent } from '../http/responses.js';
import { setNextPageHeaders } from '../shared/pagination.js';
import { taskEtag } from './service.js';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const tags = ['tasks'];
const taskParams = z.object({ task_id: z.string() });

export const tasksRoutes: FastifyPluginAsyncZod = async (app) => {
  const tasks = () => app.services.tasks;
  // For a body that failed its schema: the problems of its well-formed references too.
  const referenceProblems = (body: typeof createTaskBody | typeof updateTaskBody) => async (request: FastifyRequest) =>
    tasks().referenceProblems(
      authOf(request).companyId,
      wellFormedFields(body, request.body, ['assigned_to', 'item_id']),
    );

  app.get(
    '/tasks',
    {
      config: { scope: 'tasks:read' },
      schema: {
        tags,
        summary: 'List tasks (keyset pagination; see Link and x-next-cursor)',
        querystring: listTasksQuery,
        response: { 200: z.array(taskSchema) },
      },
    },
    async (request, reply) => {
      const page = await tasks().list(authOf(request), request.query);
      setNextPageHeaders(request, reply, page.nextCursor);
      return page.tasks;
    },
  );

  app.get(
    '/tasks/:task_id',
    {
      config: { scope: 'tasks:read' },
      schema: {
        tags,
        summary: 'Get a task (ETag for If-Match on DELETE)',
        params: taskParams,
        response: { 200: taskSchema },
      },
    },
    async (request, reply) => {
      const task = await tasks().get(authOf(request), request.params.task_id);
      reply.header('etag', taskEtag(task));
      return task;
    },
  );

  app.post(
    '/tasks',
    {
      config: { scope: 'tasks:write', referenceProblems: referenceProblems(createTaskBody) },
      schema: {
        tags,
        summary: 'Create a task (fires task.created, and task.completed when created completed)',
        body: createTaskBody,
        response: { 201: taskSchema },
      },
    },
    async (request, reply) => {
      const task = await tasks().create(authOf(request), request.body);
      return reply.code(201).header('etag', taskEtag(task)).send(task);
    },
  );

  app.patch(
    '/tasks/:task_id',
    {
      config: { scope: 'tasks:write', referenceProblems: referenceProblems(updateTaskBody) },
      schema: {
        tags,
        summary: 'Update a task (partial; fires task.updated, and task.completed on completion)',
        params: taskParams,
        body: updateTaskBody,
        response: { 200: taskSchema },
      },
    },
    async (request, reply) => {
      const task = await tasks().update(authOf(request), request.params.task_id, request.body);
      reply.header('etag', taskEtag(task));
      return task;
    },
  );

  app.delete(
    '/tasks/:task_id',
    {
      config: { scope: 'tasks:write' },
      schema: {
        tags,
        summary: 'Delete (archive) a task: 404 afterwards, fires task.deleted with the task as it was',
        params: taskParams,
        response: { 204: noContent },
      },
    },
    async (request, reply) => {
      const ifMatch = request.headers['if-match'];
      await tasks().delete(authOf(request), request.params.task_id, typeof ifMatch === 'string' ? ifMatch : undefined);
      return reply.code(204).send(null);
    },
  );
};
