import { z } from 'zod';
import { authOf } from '../contracts/auth-context.js';
import { asOfQuery } from '../contracts/history.js';
import {
  batchBody,
  batchResponse,
  checkDuplicatesBody,
  checkDuplicatesResponse,
  createItemBody,
  externalIdParams,
  itemSchema,
  listItemsQuery,
  unknownListItemsParameters,
  updateItemBody,
  upsertItemBody,
} from '../contracts/items.js';
import { wellFormedFields } from '../http/error-handler.js';
import { noContent } from '../http/responses.js';
import { ValidationError } from '../shared/errors.js';
import { versionEtag } from '../shared/etag.js';
import { setNextPageHeaders } from '../shared/pagination.js';
import { runBatch } from './batch.js';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';

const tags = ['items'];
const itemParams = z.object({ item_id: z.string() });
const etag = versionEtag;
const ifMatchOf = (request: FastifyRequest) => {
  const header = request.headers['if-match'];
  return typeof header === 'string' ? header : undefined;
};

export const itemsRoutes: FastifyPluginAsyncZod = async (app) => {
  const items = () => app.services.items;

  app.get(
    '/items',
    {
      config: { scope: 'items:read' },
      // On the query string as parsed, before the schema: its output loses a `__proto__` key (see listItemsQuery).
      preValidation: async (request) => {
        const unknown = unknownListItemsParameters(request.query);
        ValidationError.throwIfAny(unknown.map((path) => ({ path, message: 'unknown field' })));
      },
      schema: {
        tags,
        summary: 'List items (keyset pagination; see Link and x-next-cursor)',
        querystring: listItemsQuery,
        response: { 200: z.array(itemSchema) },
      },
    },
    async (request, reply) => {
      const page = await items().list(authOf(request), request.query);
      setNextPageHeaders(request, reply, page.nextCursor);
      return page.items;
    },
  );

  app.get(
    '/items/:item_id',
    {
      config: { scope: 'items:read' },
      schema: {
        tags,
        summary: 'Get an item (ETag carries its version); with as_of, the item as it was then',
        description:
          'With `as_of`, the item as it was at that time, rebuilt from its history (kept HISTORY_RETENTION_DAYS, default 365): also an item deleted since; 404 when it did not exist then (not yet created, or deleted) or the time is older than the retention; a malformed or future time is 400. Without ETag: it is not the current version.',
        params: itemParams,
        querystring: asOfQuery,
        response: { 200: itemSchema },
      },
    },
    async (request, reply) => {
      const { as_of: asOf } = request.query;
      if (asOf) return app.services.history.itemAsOf(authOf(request).companyId, request.params.item_id, asOf);
      const item = await items().get(authOf(request), request.params.item_id);
      reply.header('etag', etag(item.version));
      return item;
    },
  );

  // For a body that failed its schema: the problems of its well-typed references too.
  const newItemReferenceProblems = async (request: FastifyRequest) => {
    const refs = wellFormedFields(createItemBody, request.body, ['pipeline_id', 'stage_id', 'status_id', 'metadata']);
    if (refs.pipeline_id === undefined) return [];
    return (await items().checkNewItem(authOf(request).companyId, { ...refs, pipeline_id: refs.pipeline_id })).problems;
  };

  app.post(
    '/items',
    {
      config: { scope: 'items:write', referenceProblems: newItemReferenceProblems },
      schema: {
        tags,
        summary: 'Create an item',
        body: createItemBody,
        response: { 201: itemSchema },
      },
    },
    async (request, reply) => {
      const item = await items().create(authOf(request), request.body);
      return reply.code(201).header('etag', etag(item.version)).send(item);
    },
  );

  app.patch(
    '/items/:item_id',
    {
      config: {
        scope: 'items:write',
        referenceProblems: async (request) => {
          const refs = wellFormedFields(updateItemBody, request.body, ['stage_id', 'status_id', 'metadata']);
          return items().updateReferenceProblems(
            authOf(request).companyId,
            (request.params as { item_id: string }).item_id,
            refs,
          );
        },
      },
      schema: {
        tags,
        summary: 'Update an item (partial; optimistic locking with version or If-Match)',
        params: itemParams,
        body: updateItemBody,
        response: { 200: itemSchema },
      },
    },
    async (request, reply) => {
      const item = await items().update(authOf(request), request.params.item_id, request.body, ifMatchOf(request));
      reply.header('etag', etag(item.version));
      return item;
    },
  );

  app.delete(
    '/items/:item_id',
    {
      config: { scope: 'items:write' },
      schema: {
        tags,
        summary: 'Delete (archive) an item: 404 afterwards, its tasks stay, fires item.deleted with the item as it was',
        params: itemParams,
        response: { 204: noContent },
      },
    },
    async (request, reply) => {
      await items().delete(authOf(request), request.params.item_id, ifMatchOf(request));
      return reply.code(204).send(null);
    },
  );

  app.put(
    '/items/by-external-id/:external_id',
    {
      config: { scope: 'items:write' },
      schema: {
        tags,
        summary:
          'Create (201) or update (200) the item with this external_id (optimistic locking with version or If-Match)',
        params: externalIdParams,
        body: upsertItemBody,
        response: {
          200: itemSchema,
          201: itemSchema,
        },
      },
    },
    async (request, reply) => {
      const { item, created } = await items().upsert(
        authOf(request),
        request.params.external_id,
        request.body,
        ifMatchOf(request),
      );
      return reply
        .code(created ? 201 : 200)
        .header('etag', etag(item.version))
        .send(item);
    },
  );

  app.post(
    '/items/batch',
    {
      config: { scope: 'items:write' },
      schema: {
        tags,
        summary: 'Create, update and upsert up to 100 items in one request; one result per operation, in order',
        description:
          'Each operation stands alone (no transaction) and records its own events; an invalid or failed operation is a result with its status and a problem object, the others proceed. The request counts once for the rate limit, and an Idempotency-Key covers the whole batch. An unknown `op`, no operations or more than 100 make the whole request a 400.',
        body: batchBody,
        response: { 200: batchResponse },
      },
    },
    async (request) => ({
      results: await runBatch(items(), authOf(request), request.body.operations, String(request.id)),
    }),
  );

  app.post(
    '/items/check-duplicates',
    {
      config: { scope: 'items:read' },
      schema: {
        tags,
        summary: "Find items matching the pipeline's duplicate-detection config, without creating anything",
        body: checkDuplicatesBody,
        response: { 200: checkDuplicatesResponse },
      },
    },
    async (request) => items().checkDuplicates(authOf(request), request.body),
  );
};
