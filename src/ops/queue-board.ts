import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { isAdminToken } from '../admin/plugin.js';
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

/** The operators' queue dashboard (bull-board) at /admin/queues, behind ADMIN_TOKEN. */
export async function registerQueueBoard(app: FastifyInstance, queues: Queue[]): Promise<void> {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(BASE_PATH);
  createBullBoard({ queues: queues.map((queue) => new BullMQAdapter(queue)), serverAdapter });
  await app.register(async (board) => {
    board.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      if (isAuthorized(request, app.deps.config.ADMIN_TOKEN)) return;
      reply.header('www-authenticate', 'Basic realm="queues"');
      return reply.code(401).type('text/plain').send('Unauthorized');
    });
    await board.register(serverAdapter.registerPlugin() as never, { prefix: BASE_PATH });
  });
}
