import { authOf } from '../contracts/auth-context.js';
import { itemSchema } from '../contracts/items.js';
import { taskSchema } from '../contracts/tasks.js';
import type { Export } from './service.js';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

export const NDJSON = 'application/x-ndjson';

const HOW = (kind: string, scope: string) =>
  `Every live ${kind} of the company, one per line in the same shape as GET (NDJSON), in creation order, streamed as it is read: no paging, any size. \`x-next-cursor\` is a position in the events feed taken before the read: every change before it is in the export, so reading \`GET /v1/ext/events?cursor=<x-next-cursor>\` (no other filters) from there and applying each ${kind} event by \`version\` / \`updated_at\` brings the copy up to date. Scope ${scope}, as the list; counts once for the rate limit. A response cut short (the connection dropped) ends without a final newline: export again.`;

function send(reply: FastifyReply, exported: Export) {
  return reply.header('content-type', NDJSON).header('x-next-cursor', exported.nextCursor).send(exported.body);
}

export const exportRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/export/items',
    {
      config: { scope: 'items:read', ndjson: true },
      schema: {
        tags: ['items'],
        summary: 'Export every item as NDJSON, with the feed position to follow it from',
        description: HOW('item', 'items:read'),
        response: { 200: itemSchema },
      },
    },
    async (request, reply) => send(reply, await app.services.exports.items(authOf(request))),
  );

  app.get(
    '/export/tasks',
    {
      config: { scope: 'tasks:read', ndjson: true },
      schema: {
        tags: ['tasks'],
        summary: 'Export every task as NDJSON, with the feed position to follow it from',
        description: HOW('task', 'tasks:read'),
        response: { 200: taskSchema },
      },
    },
    async (request, reply) => send(reply, await app.services.exports.tasks(authOf(request))),
  );
};
