import { z } from 'zod';
import { requireCompany } from '../http/require-company.js';
import { createErasureBody, erasureSchema } from './schemas.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const companyParams = z.object({ company_id: z.string() });
const tags = ['admin'];

/** Erasure of one record on a company's data-protection request (docs/erasure.md). */
export const erasuresAdminRoutes: FastifyPluginAsyncZod = async (app) => {
  app.post(
    '/companies/:company_id/erasures',
    {
      schema: {
        tags,
        summary: "Erase one item or task everywhere: the record, its history, idempotency records, its events' values",
        description:
          'Answers 202 at once; a worker erases within a minute. The record (archived or not), its history, the kept answers of Idempotency-Key requests that mention it, and the `data` and `changes` of its events and of their delivery records are removed; events keep event_id, type, sequence, occurred_at and actor and gain `erased: true`. 404 for a record the company never had (or one already erased).',
        params: companyParams,
        body: createErasureBody,
        response: { 202: erasureSchema },
      },
    },
    async (request, reply) => {
      await requireCompany(app, request.params.company_id);
      return reply.code(202).send(await app.services.erasures.request(request.params.company_id, request.body));
    },
  );

  app.get(
    '/companies/:company_id/erasures/:erasure_id',
    {
      schema: {
        tags,
        summary: 'Where an erasure stands: queued, running or completed',
        params: companyParams.extend({ erasure_id: z.string() }),
        response: { 200: erasureSchema },
      },
    },
    async (request) => {
      await requireCompany(app, request.params.company_id);
      return app.services.erasures.get(request.params.company_id, request.params.erasure_id);
    },
  );
};
