import { z } from 'zod';
import { authOf } from '../auth/ext-auth.js';
import { setNextPageHeaders } from '../shared/pagination.js';
import { feedEventSchema, listEventsQuery } from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const tags = ['events'];
const SCOPES = 'Needs tasks:read (task.* events) or items:read (item.* events); a key sees the kinds its scopes allow.';

export const eventsRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/events',
    {
      config: { anyScope: ['tasks:read', 'items:read'] },
      schema: {
        tags,
        summary: 'List events, oldest first (keyset pagination; see Link and x-next-cursor)',
        description: `Every event of the company for EVENTS_RETENTION_DAYS (default 30) after it occurred, whatever happened to its webhooks: an integrator that missed deliveries can backfill from here. ${SCOPES}`,
        querystring: listEventsQuery,
        response: { 200: z.array(feedEventSchema) },
      },
    },
    async (request, reply) => {
      const page = await app.services.eventFeed.list(authOf(request), request.query);
      setNextPageHeaders(request, reply, page.nextCursor);
      return page.events;
    },
  );

  app.get(
    '/events/:event_id',
    {
      config: { anyScope: ['tasks:read', 'items:read'] },
      schema: {
        tags,
        summary: 'Get one event (404 once it is older than the retention)',
        description: SCOPES,
        params: z.object({ event_id: z.string() }),
        response: { 200: feedEventSchema },
      },
    },
    async (request) => app.services.eventFeed.get(authOf(request), request.params.event_id),
  );
};
