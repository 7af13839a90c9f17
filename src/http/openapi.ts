import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { EVENT_TYPES } from '../events/envelope.js';
import { PROBLEM_CONTENT_TYPE } from './problem.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const EXT_PREFIX = '/v1/ext/';

const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': { $ref: '#/components/headers/RateLimitLimit' },
  'RateLimit-Remaining': { $ref: '#/components/headers/RateLimitRemaining' },
  'RateLimit-Reset': { $ref: '#/components/headers/RateLimitReset' },
  'RateLimit-Policy': { $ref: '#/components/headers/RateLimitPolicy' },
};

const COMPONENT_HEADERS = {
  RateLimitLimit: { description: 'Requests allowed per window for this API key', schema: { type: 'integer' } },
  RateLimitRemaining: { description: 'Requests left in the current sliding window', schema: { type: 'integer' } },
  RateLimitReset: { description: 'Seconds until the oldest counted request leaves the window', schema: { type: 'integer' } },
  RateLimitPolicy: { description: 'The policy, e.g. `60;w=60`', schema: { type: 'string' } },
  RetryAfter: { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } },
  Link: { description: 'RFC 8288 link to the next page: `<...&cursor=X>; rel="next"`; absent on the last page', schema: { type: 'string' } },
  NextCursor: { description: 'Cursor of the next page; absent on the last page', schema: { type: 'string' } },
  RequestId: { description: 'Request id (an incoming sane x-request-id is reused)', schema: { type: 'string' } },
};

const DESCRIPTION = `The external API of the pipeline records service. Authenticate with an API key in the
\`x-api-key\` header; each operation names the scope it needs. Errors are RFC 9457 problem details
(\`application/problem+json\`) with a stable \`code\`. Lists are bare JSON arrays with keyset pagination
(\`limit\`, \`cursor\`, \`Link\` and \`x-next-cursor\`). Every POST accepts an \`Idempotency-Key\` header.
Webhook deliveries (see \`webhooks\`) carry Standard Webhooks signatures.`;

const STATUS_DESCRIPTIONS: Record<string, string> = {
  '200': 'OK', '201': 'Created', '202': 'Accepted', '204': 'No content', '400': 'Invalid input (validation_failed, invalid_json)',
  '401': 'Missing, unknown, revoked or expired API key', '402': 'Company subscription inactive', '403': 'The key lacks the required scope',
  '404': 'Not found in the caller company', '409': 'Conflict (version_conflict, idempotency_in_progress)',
  '412': 'If-Match does not match the current ETag', '413': 'Body over 1 MiB', '415': 'Body is not application/json',
  '422': 'Idempotency-Key reused with a different body', '429': 'Rate limit exceeded', '503': 'A backing service is unreachable',
};

/** `GET /v1/ext/items/{item_id}` → `getItemsItemId`: stable ids that tools can name operations by. */
function operationIdFor(method: string, path: string): string {
  const words = path.slice(EXT_PREFIX.length).split(/[/{}_-]+/).filter(Boolean);
  return method + words.map((word) => word[0].toUpperCase() + word.slice(1)).join('');
}

/** Drops component schemas nothing refers to (the zod registry also holds admin-only and input twins). */
function pruneUnusedSchemas(document: Json): void {
  const schemas: Json = document.components?.schemas ?? {};
  const used = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith('#/components/schemas/')) {
        const name = value.slice('#/components/schemas/'.length);
        if (!used.has(name)) {
          used.add(name);
          visit(schemas[name]);
        }
      } else visit(value);
    }
  };
  visit({ paths: document.paths, webhooks: document.webhooks });
  for (const name of Object.keys(schemas)) if (!used.has(name)) delete schemas[name];
}

/** Adds what the zod schemas cannot say: problem+json errors, rate-limit and paging headers, idempotency, webhooks. */
function decorateDocument(document: Json): Json {
  for (const [path, operations] of Object.entries<Json>(document.paths ?? {})) {
    for (const [method, operation] of Object.entries<Json>(operations)) {
      operation.operationId ??= operationIdFor(method, path);
      for (const [status, response] of Object.entries<Json>(operation.responses ?? {})) {
        const code = Number(status);
        if (response.description === 'Default Response') response.description = STATUS_DESCRIPTIONS[status] ?? 'Response';
        if (code >= 400 && response.content?.['application/json']) {
          response.content = { [PROBLEM_CONTENT_TYPE]: response.content['application/json'] };
        }
        response.headers = { 'x-request-id': { $ref: '#/components/headers/RequestId' }, ...response.headers };
        const rateLimited = path.startsWith(EXT_PREFIX) && code !== 401 && code !== 402;
        if (rateLimited) Object.assign(response.headers, RATE_LIMIT_HEADERS);
        if (code === 429 || code === 503) response.headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
        if (code === 200 && method === 'get' && response.content?.['application/json']?.schema?.type === 'array') {
          response.headers.Link = { $ref: '#/components/headers/Link' };
          response.headers['x-next-cursor'] = { $ref: '#/components/headers/NextCursor' };
        }
      }
      if (method === 'post' && path.startsWith(EXT_PREFIX)) {
        operation.parameters = [
          ...(operation.parameters ?? []),
          {
            name: 'Idempotency-Key', in: 'header', required: false,
            description: 'Makes a retry safe: the first response is kept 24 h per API key and replayed (`idempotent-replayed: true`)',
            schema: { type: 'string', minLength: 1, maxLength: 255 },
          },
        ];
      }
      if (method === 'patch' && path.includes('/items/')) {
        operation.parameters = [
          ...(operation.parameters ?? []),
          { name: 'If-Match', in: 'header', required: false, description: 'The ETag (`"<version>"`) the update expects; 412 when stale', schema: { type: 'string' } },
        ];
      }
    }
  }
  document.components = { ...document.components, headers: COMPONENT_HEADERS };
  document.webhooks = Object.fromEntries(
    EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          operationId: `on${type.split('.').map((word) => word[0].toUpperCase() + word.slice(1)).join('')}`,
          summary: `${type} delivered to a REST hook`,
          description: 'Signed per Standard Webhooks; verify webhook-signature before trusting the body. Answer 2xx; 410 unsubscribes.',
          parameters: [
            { name: 'webhook-id', in: 'header', required: true, schema: { type: 'string' }, description: 'The event_id; the same on every retry' },
            { name: 'webhook-timestamp', in: 'header', required: true, schema: { type: 'string' }, description: 'Unix seconds' },
            { name: 'webhook-signature', in: 'header', required: true, schema: { type: 'string' }, description: '`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`' },
          ],
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/Event' } } } },
          security: [],
          responses: { '200': { description: 'Received' }, '410': { description: 'Gone: the hook is deleted' } },
        },
      },
    ]),
  );
  document.security = [{ ApiKeyAuth: [] }];
  pruneUnusedSchemas(document);
  return document;
}

/**
 * The OpenAPI 3.1 document of the external API, generated from the same zod schemas that validate
 * requests and serialize responses.
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Pipeline Records API', version: '1.0.0', description: DESCRIPTION, license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' } },
      servers: [{ url: '/', description: 'This server' }],
      components: {
        securitySchemes: {
          ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        },
      },
      tags: [
        { name: 'pipelines', description: 'Pipelines, their stages, statuses and custom fields (read only)' },
        { name: 'items', description: 'Items (deals) moving through pipelines' },
        { name: 'tasks', description: 'Tasks assigned to users' },
        { name: 'hooks', description: 'REST hook subscriptions and their deliveries' },
      ],
    },
    transform: (input) => {
      const { url, route } = input as { url: string; route: { config?: { scope?: string } } };
      // The document of the external API only (DECISIONS.md section 11): admin and ops routes are left out.
      if (!url.startsWith(EXT_PREFIX) || url === `${EXT_PREFIX}openapi.json`) return { schema: { hide: true } as never, url };
      const transformed = jsonSchemaTransform(input);
      const scope = route.config?.scope;
      (transformed.schema as Json).security = [{ ApiKeyAuth: scope ? [scope] : [] }];
      if (scope) (transformed.schema as Json)['x-required-scope'] = scope;
      return transformed;
    },
    transformObject: (input) => decorateDocument(jsonSchemaTransformObject(input) as Json) as never,
  });
}

export function registerOpenApiRoutes(app: FastifyInstance): void {
  app.get(`${EXT_PREFIX}openapi.json`, { schema: { hide: true } }, async () => app.swagger());
}
