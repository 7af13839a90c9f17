import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { failedAuthRefusal } from '../auth/failed-auth-throttle.js';
import { isAdminToken } from './admin.js';
import type { Queue } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

const BASE_PATH = '/admin/queues';

/** Browsers cannot send a bearer token to a page, so the board also takes HTTP Basic with ADMIN_TOKEN as the password. */
function isAuthorized(request: FastifyRequest, adminToken: string | undefined): boolean {
  const header = request.headers.authorization;
  if (isAdminToken(header, adminToken)) return true;
  if (!header?.startsWith('Basic ')) return false;
  const decoded = Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8');
  return isAdminToken(`Bearer ${decoded.slice(decoded.indexOf(':') + 1)}`, adminToken);
}

/** A page's answer, as plain text: the board is read in a browser. */
function refuse(reply: FastifyReply, status: 401 | 429, headers: Record<string, string>, text: string) {
  return reply.code(status).headers(headers).type('text/plain').send(text);
}

/**
 * The operators' queue dashboard (bull-board) at /admin/queues, behind ADMIN_TOKEN and the failed-auth
 * throttle of the admin API (DECISIONS.md 13.4): an address over the limit gets 429 before its login
 * is compared; a wrong login counts, a request without credentials (a browser's first visit) does not.
 */
export async function registerQueueBoard(app: FastifyInstance, queues: Queue[]): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BASE_PATH);
  createBullBoard({ queues: queues.map((queue) => new BullMQAdapter(queue)), serverAdapter });
  await app.register(async (board) => {
    board.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const throttle = app.services.failedAuthThrottle;
      const blocked = throttle.blockedFor(request.ip);
      const tooMany = (wait: number) =>
        refuse(reply, 429, failedAuthRefusal(wait).headers, 'Too many failed authentication attempts');
      if (blocked !== undefined) return tooMany(blocked);
      if (isAuthorized(request, app.deps.config.ADMIN_TOKEN)) return;
      if (request.headers.authorization !== undefined) {
        const wait = await throttle.recordFailure(request.ip);
        if (wait !== undefined) return tooMany(wait);
      }
      return refuse(reply, 401, { 'www-authenticate': 'Basic realm="queues"' }, 'Unauthorized');
    });
    await board.register(serverAdapter.registerPlugin() as never, { prefix: BASE_PATH });
  });
}
