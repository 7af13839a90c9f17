import { z } from 'zod';
import { authOf } from '../contracts/auth-context.js';
import { historyQuery, itemHistoryEntrySchema, taskHistoryEntrySchema } from '../contracts/history.js';
import { setNextPageHeaders } from '../shared/pagination.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const RETENTION =
  'Kept HISTORY_RETENTION_DAYS (default 365) after each change, also for a deleted (archived) record; newest first, keyset paged (`Link` / `x-next-cursor`).';

export const historyRoutes: FastifyPluginAsyncZod = async (app) => {
  const history = () => app.services.history;

  app.get(
    '/items/:item_id/history',
    {
      config: { scope: 'items:read' },
      schema: {
        tags: ['items'],
        summary: "List an item's changes, newest first: who changed what, and when",
        description: `Every change of the item, as its event recorded it (item.created, item.updated with its \`changes\`, item.deleted), with the item's version after it. ${RETENTION}`,
        params: z.object({ item_id: z.string() }),
        querystring: historyQuery,
        response: { 200: z.array(itemHistoryEntrySchema) },
      },
    },
    async (request, reply) => {
      const page = await history().itemHistory(authOf(request).companyId, request.params.item_id, request.query);
      setNextPageHeaders(request, reply, page.nextCursor);
      return page.entries;
    },
  );

  app.get(
    '/tasks/:task_id/history',
    {
      config: { scope: 'tasks:read' },
      schema: {
        tags: ['tasks'],
        summary: "List a task's changes, newest first: who changed what, and when",
        description: `Every change of the task, as its events recorded it (task.created, task.updated with its \`changes\`, task.completed, task.overdue, task.deleted). ${RETENTION}`,
        params: z.object({ task_id: z.string() }),
        querystring: historyQuery,
        response: { 200: z.array(taskHistoryEntrySchema) },
      },
    },
    async (request, reply) => {
      const page = await history().taskHistory(authOf(request).companyId, request.params.task_id, request.query);
      setNextPageHeaders(request, reply, page.nextCursor);
      return page.entries;
    },
  );
};
