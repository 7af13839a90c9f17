import { z } from 'zod';
import { authOf } from '../contracts/auth-context.js';
import { setNextPageHeaders } from '../shared/pagination.js';
import { feedEventSchema, listEventsQuery } from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const tags = ['events'];
const SCOPES =
  'Needs tasks:read (task.* events), items:read (item.* events) or hooks:manage (hook.disabled); a key sees the kinds its scopes allow.';

export const eventsRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/events',
    {
      config: { anyScope: ['tasks:read', 'items:read', 'hooks:manage'] },
      schema: {
        tags,
        summary: 'Read the change feed: events in sequence order from a position (see x-next-cursor)',
        description: `Every event of the company for EVENTS_RETENTION_DAYS (default 30), in \`sequence\` order: once an event is readable, no event of the company with a smaller sequence ever becomes readable, so a client reading forward from a position receives every event exactly once. Every answer, the last page and an empty one included, carries \`x-next-cursor\` and \`Link: rel="next"\`: the position after the last event returned (the same position when none was). Start after a known sequence with \`after\`; with \`wait\`, an answer that would be empty waits up to that many seconds for the next event. ${SCOPES}`,
        querystring: listEventsQuery,
        response: { 200: z.array(feedEventSchema) },
      },
    },
    async (request, reply) => {
      // A waiting request stops waiting when its client goes away.
      const gone = new AbortController();
      const onClose = () => gone.abort();
      reply.raw.once('close', onClose);
      try {
        const page = await app.services.eventFeed.list(authOf(request), request.query, gone.signal);
        setNextPageHeaders(request, reply, page.nextCursor, { drop: ['after'] });
        return page.events;
      } finally {
        reply.raw.off('close', onClose);
      }
    },
  );

  app.get(
    '/events/:event_id',
    {
      config: { anyScope: ['tasks:read', 'items:read', 'hooks:manage'] },
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
