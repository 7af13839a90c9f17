import fastifySwagger from '@fastify/swagger';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { WEBHOOK_EVENT_TYPES, webhookSchemaId } from '../contracts/envelope.js';
import { FILTER_OPERATORS } from '../contracts/items.js';
import { deprecationHeaders, type FieldDeprecation } from '../http/deprecation.js';
import { ERROR_CATALOGUE, errorTypeUri } from '../http/error-reference.js';
import { operationIdOf } from '../http/operation-ids.js';
import { describeParameters } from '../http/parameter-descriptions.js';
import { PROBLEM_CONTENT_TYPE } from '../http/problem.js';
import { addErrorResponses, IF_MATCH } from '../http/responses.js';
import type { FastifyInstance } from 'fastify';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const EXT_PREFIX = '/v1/ext/';
const ADMIN_PREFIX = '/v1/admin/';
const LICENSE = { name: 'Apache-2.0', identifier: 'Apache-2.0' };

const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': { $ref: '#/components/headers/RateLimitLimit' },
  'RateLimit-Remaining': { $ref: '#/components/headers/RateLimitRemaining' },
  'RateLimit-Reset': { $ref: '#/components/headers/RateLimitReset' },
  'RateLimit-Policy': { $ref: '#/components/headers/RateLimitPolicy' },
};

const EXAMPLE_CURSOR = 'eyJ2IjpbIjIwMjYtMTEtMjJUMDk6MzA6MDAuMDAwWiJdfQ';

const COMPONENT_HEADERS = {
  RateLimitLimit: {
    description: 'Requests allowed per window for this API key (`RATE_LIMIT_MAX`)',
    schema: { type: 'integer', minimum: 1, maximum: 1_000_000_000 },
    example: 60,
  },
  RateLimitRemaining: {
    description: 'Requests left in the current sliding window',
    schema: { type: 'integer', minimum: 0, maximum: 1_000_000_000 },
    example: 59,
  },
  RateLimitReset: {
    description: 'Seconds until the oldest counted request leaves the window',
    schema: { type: 'integer', minimum: 0, maximum: 86_400 },
    example: 42,
  },
  RateLimitPolicy: {
    description: 'The policy: limit and window in seconds',
    schema: { type: 'string' },
    example: '60;w=60',
  },
  RetryAfter: {
    description: 'Seconds to wait before retrying',
    schema: { type: 'integer', minimum: 1, maximum: 86_400 },
    example: 7,
  },
  RequestId: {
    description: 'Request id (an incoming sane x-request-id is reused)',
    schema: { type: 'string' },
    example: '0d6f4d1e-3c1a-4b8e-9d0e-1f2a3b4c5d6e',
  },
};

const FEED_PATH = '/v1/ext/events';
const ITEMS_PATH = '/v1/ext/items';

const NEXT_CURSOR_HEADER = {
  description:
    'Cursor of the next page, for the `cursor` query parameter; absent on the last page (a page may hold fewer than `limit` records: it ends at about 1 MiB)',
  required: false,
  schema: { type: 'string' },
  example: EXAMPLE_CURSOR,
};

const FEED_CURSOR_HEADER = {
  description:
    'The position after the last event returned (the same position when none was), on every answer: store it and pass it as `cursor` to resume exactly there',
  required: true,
  schema: { type: 'string' },
  example: EXAMPLE_CURSOR,
};

/**
 * `metadata.<field>=v` and `metadata.<field>[<op>]=v` are query parameters whose names vary, which OpenAPI
 * says as one exploded form-style object: each property is a parameter of its own name.
 */
const METADATA_FILTERS = {
  name: 'metadata',
  in: 'query',
  required: false,
  style: 'form',
  explode: true,
  description: `Custom-field filters (need \`pipeline_id\`), one query parameter each, named \`metadata.<field>\` (equals) or \`metadata.<field>[<op>]\` with \`<op>\` one of ${FILTER_OPERATORS.join(', ')}; \`in\` takes comma-separated values, \`exists\` takes true or false. Example: \`metadata.deal_value[gte]=10000\`.`,
  schema: {
    type: 'object',
    patternProperties: { [`^metadata\\.[^\\[\\]]+(\\[(${FILTER_OPERATORS.join('|')})\\])?$`]: { type: 'string' } },
    additionalProperties: false,
  },
  example: { 'metadata.deal_value[gte]': '10000' },
};

/** The Deprecation and Sunset headers of an answer with deprecated fields, with this route's dates as examples. */
function deprecationHeadersDoc(operation: Json): Json {
  const deprecation = operation['x-deprecation'] as FieldDeprecation;
  const values = deprecationHeaders(deprecation);
  const fields = deprecation.fields.map((field) => `\`${field}\``).join(', ');
  return {
    Deprecation: {
      description: `RFC 9745: when ${fields} of this answer were deprecated (\`@\` and Unix seconds)`,
      required: true,
      schema: { type: 'string' },
      example: values.deprecation,
    },
    Sunset: {
      description: `RFC 8594: from this date ${fields} may be gone from this answer`,
      required: true,
      schema: { type: 'string' },
      example: values.sunset,
    },
  };
}

const DESCRIPTION = `The external API of the pipeline records service. Authenticate with an API key in the
\`x-api-key\` header; each operation names the scope it needs. Errors are RFC 9457 problem details
(\`application/problem+json\`) with a stable \`code\`, explained at [/docs/errors](/docs/errors). Lists are bare JSON arrays with keyset pagination
(\`limit\`, \`cursor\`, \`Link\` and \`x-next-cursor\`); a page ends at \`limit\` records or at about 1 MiB of them,
whichever comes first, so follow the cursor until it is absent. Every POST accepts an \`Idempotency-Key\` header.
Webhook deliveries (see \`webhooks\`) carry Standard Webhooks signatures. An event envelope (webhooks, the
events feed) is at most 256 KiB: values over 4 KiB (custom fields of items, descriptions and notes of tasks)
arrive as \`TruncatedValue\` markers; read the record by its id for them.

The admin API (companies, users, pipelines, API keys) has its own reference: [/docs/admin](/docs/admin).`;

const STATUS_DESCRIPTIONS: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '202': 'Accepted',
  '204': 'No content',
  '400': 'Invalid input (validation_failed, invalid_json)',
  '401': 'Missing, unknown, revoked or expired API key',
  '402': 'Company subscription inactive',
  '403': 'The key lacks the required scope',
  '404': 'Not found in the caller company',
  '409': 'Conflict (version_conflict, idempotency_in_progress)',
  '412': 'If-Match does not match the current ETag',
  '413': 'Body over 1 MiB',
  '415': 'Body is not application/json',
  '422': 'Idempotency-Key reused with a different body',
  '429': 'Rate limit exceeded',
  '503': 'A backing service is unreachable, or a write lost every retry to concurrent writers',
};

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

/** On a 429 the window is used up: its own example instead of the shared header's. */
const EXHAUSTED_REMAINING = {
  description: 'Requests left in the current sliding window: none',
  schema: { type: 'integer', minimum: 0, maximum: 1_000_000 },
  example: 0,
};

const EXAMPLE_REQUEST_ID = '0d6f4d1e-3c1a-4b8e-9d0e-1f2a3b4c5d6e';

/** Extra members of a problem, by code, for the examples. */
function problemExtras(code: string, scope: string | undefined): Json {
  switch (code) {
    case 'validation_failed':
      return {
        detail: 'name: Too small: expected string to have >=1 characters (and 1 more)',
        errors: [
          { path: 'name', message: 'Too small: expected string to have >=1 characters' },
          { path: 'stage_id', message: 'is not a stage of this pipeline' },
        ],
      };
    case 'insufficient_scope':
      return {
        detail: `This operation needs the ${scope ?? 'items:read'} scope`,
        required_scope: scope ?? 'items:read',
      };
    case 'version_conflict':
    case 'precondition_failed':
      return { current_version: 4 };
    default:
      return {};
  }
}

/** One example body per code that answers with this status here (section 2 of the error model). */
function problemExamples(status: number, method: string, path: string, scope: string | undefined): Json {
  const examples: Json = {};
  for (const [code, entry] of Object.entries(ERROR_CATALOGUE)) {
    if (entry.status !== status) continue;
    if (entry.appliesTo && !entry.appliesTo(method.toUpperCase(), path)) continue;
    examples[code] = {
      summary: entry.title,
      value: {
        type: errorTypeUri(code),
        title: entry.title,
        status,
        code,
        detail: entry.meaning,
        ...problemExtras(code, scope),
        request_id: EXAMPLE_REQUEST_ID,
      },
    };
  }
  return examples;
}

/**
 * An export (route config `ndjson`): its 200 is a stream of records, one JSON document a line, not one JSON
 * document; its schema describes one line. It carries the feed position in `x-next-cursor`.
 */
function describeNdjson(operation: Json): void {
  delete operation['x-ndjson'];
  const ok = operation.responses?.['200'];
  const json = ok?.content?.['application/json'];
  if (!json) return;
  ok.description = 'NDJSON: one record per line, each as GET answers it';
  ok.content = { 'application/x-ndjson': { ...json, example: `${JSON.stringify(json.schema?.example ?? {})}\n` } };
  ok.headers = {
    ...ok.headers,
    'x-next-cursor': {
      description:
        'The events feed position taken before the read: pass it as `cursor` to `GET /v1/ext/events` to follow every change since',
      schema: { type: 'string' },
      example: EXAMPLE_CURSOR,
    },
  };
}

/** Adds what the zod schemas cannot say: problem+json errors, rate-limit and paging headers, idempotency, webhooks. */
function decorateDocument(document: Json): Json {
  for (const [path, operations] of Object.entries<Json>(document.paths ?? {})) {
    for (const [method, operation] of Object.entries<Json>(operations)) {
      const operationId = operationIdOf(method, path);
      if (operationId) operation.operationId = operationId;
      if (operation['x-ndjson']) describeNdjson(operation);
      for (const [status, response] of Object.entries<Json>(operation.responses ?? {})) {
        const code = Number(status);
        if (response.description === 'Default Response')
          response.description = STATUS_DESCRIPTIONS[status] ?? 'Response';
        if (code >= 400 && response.content?.['application/json']) {
          const examples = problemExamples(code, method, path, operation['x-required-scope']);
          response.content = {
            [PROBLEM_CONTENT_TYPE]: {
              ...response.content['application/json'],
              ...(Object.keys(examples).length > 0 ? { examples } : {}),
            },
          };
        }
        response.headers = { 'x-request-id': { $ref: '#/components/headers/RequestId' }, ...response.headers };
        const rateLimited = path.startsWith(EXT_PREFIX) && code !== 401 && code !== 402;
        if (rateLimited) Object.assign(response.headers, RATE_LIMIT_HEADERS);
        if (code === 429 || code === 503) response.headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
        if (code === 429 && rateLimited) response.headers['RateLimit-Remaining'] = EXHAUSTED_REMAINING;
        if (code === 200 && method === 'get' && response.content?.['application/json']?.schema?.type === 'array') {
          // Inline, not a $ref: generators read `required` only on the header object itself, and the feed's
          // cursor is on every answer while another list's is absent on its last page.
          const feed = path === FEED_PATH;
          response.headers.Link = {
            description: feed
              ? 'RFC 8288 link to the position after the last event returned; on every answer, an empty one included'
              : 'RFC 8288 link to the next page; absent on the last page. Follow it (or pass `x-next-cursor` as `cursor`) until it is absent: a page holds at most `limit` records and ends earlier at about 1 MiB of them',
            required: feed,
            schema: { type: 'string' },
            example: `<${path}?limit=50&cursor=${EXAMPLE_CURSOR}>; rel="next"`,
          };
          response.headers['x-next-cursor'] = feed ? FEED_CURSOR_HEADER : NEXT_CURSOR_HEADER;
        }
        if (code === 200 && method === 'get' && path === ITEMS_PATH) operation.parameters?.push(METADATA_FILTERS);
        if (code < 300 && operation['x-deprecation']) Object.assign(response.headers, deprecationHeadersDoc(operation));
      }
      if (method === 'post' && path.startsWith(EXT_PREFIX)) {
        operation.parameters = [
          ...(operation.parameters ?? []),
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description:
              'Makes a retry safe: the first response is kept 24 h per API key and replayed (`idempotent-replayed: true`)',
            schema: { type: 'string', minLength: 1, maxLength: 255 },
          },
        ];
      }
      delete operation['x-deprecation'];
      const ifMatch = IF_MATCH[`${method} ${path}`];
      if (ifMatch) {
        operation.parameters = [
          ...(operation.parameters ?? []),
          { name: 'If-Match', in: 'header', required: false, description: ifMatch, schema: { type: 'string' } },
        ];
      }
    }
  }
  document.components = { ...document.components, headers: COMPONENT_HEADERS };
  // One entry per type a delivery can carry, each with its own payload schema (src/hooks/payloads.ts).
  document.webhooks = Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => [
      type,
      {
        post: {
          operationId: `on${webhookSchemaId(type).replace(/Event$/, '')}`,
          summary:
            type === 'hook.ping'
              ? 'hook.ping sent by POST /v1/ext/hooks/{hook_id}/test'
              : `${type} delivered to a REST hook`,
          description:
            'Signed per Standard Webhooks; verify webhook-signature before trusting the body, dedupe by webhook-id. Answer 2xx quickly; 410 deletes the hook; anything else is retried.',
          parameters: [
            {
              name: 'webhook-id',
              in: 'header',
              required: true,
              schema: { type: 'string' },
              description: 'The event_id; the same on every retry',
            },
            {
              name: 'webhook-timestamp',
              in: 'header',
              required: true,
              schema: { type: 'string' },
              description: 'Unix seconds',
            },
            {
              name: 'webhook-signature',
              in: 'header',
              required: true,
              schema: { type: 'string' },
              description:
                '`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, one per valid secret, space-separated (two for 24 h after a secret rotation)',
            },
          ],
          requestBody: {
            required: true,
            content: {
              'application/json': { schema: { $ref: `#/components/schemas/${webhookSchemaId(type)}` } },
            },
          },
          security: [],
          responses: {
            '200': { description: 'Received (any 2xx)' },
            '410': { description: 'Gone: the hook is deleted' },
          },
        },
      },
    ]),
  );
  document.security = [{ ApiKeyAuth: [] }];
  describeParameters(document);
  pruneUnusedSchemas(document);
  return document;
}

const ADMIN_DESCRIPTION = `The admin API of the pipeline records service: companies, users, pipelines, API keys
(creation, scopes, expiry, rename, revocation), automations and their runs. It stands in for the product's
settings UI and is not part of the external API. Every call needs \`Authorization: Bearer <ADMIN_TOKEN>\`.
Errors are RFC 9457 problem details (\`application/problem+json\`) with a stable \`code\`.

The external API, for integrators, has its own reference: [/docs](/docs).`;

const ADMIN_STATUS_DESCRIPTIONS: Record<string, string> = {
  ...STATUS_DESCRIPTIONS,
  '401': 'Missing or wrong admin bearer token',
  '404': 'Not found',
  '429': 'Too many failed authentication attempts from this address',
};

/** `post /v1/admin/companies/{company_id}/api-keys` → "Create an API key": admin routes declare no summary. */
function adminSummary(method: string, path: string): string {
  const segments = path.split('/').filter(Boolean);
  const collection = segments.at(-1)!.startsWith('{') ? segments.at(-2)! : segments.at(-1)!;
  const listing = method === 'get' && !segments.at(-1)!.startsWith('{');
  const plural = collection.replace(/-/g, ' ').replace(/^api keys$/, 'API keys');
  const singular = plural.replace(/ies$/, 'y').replace(/s$/, '');
  // By sound: "an automation", "an API key", but "a user".
  const article = /^(?:[aeio]|API)/i.test(singular) ? 'an' : 'a';
  if (listing) return `List ${plural}`;
  const verb = { post: 'Create', get: 'Get', patch: 'Update', put: 'Replace', delete: 'Delete' }[method] ?? method;
  return `${collection === 'api-keys' && method === 'delete' ? 'Revoke' : verb} ${article} ${singular}`;
}

/** The admin document: problem+json errors with an example per code, the request id header, operation ids, the bearer scheme. */
function decorateAdminDocument(document: Json): Json {
  for (const [path, operations] of Object.entries<Json>(document.paths ?? {})) {
    for (const [method, operation] of Object.entries<Json>(operations)) {
      operation.summary ??= adminSummary(method, path);
      const operationId = operationIdOf(method, path);
      if (operationId) operation.operationId = operationId;
      if (operation['x-ndjson']) describeNdjson(operation);
      for (const [status, response] of Object.entries<Json>(operation.responses ?? {})) {
        if (response.description === 'Default Response')
          response.description = ADMIN_STATUS_DESCRIPTIONS[status] ?? 'Response';
        if (Number(status) >= 400 && response.content?.['application/json']) {
          const examples = problemExamples(Number(status), method, path, undefined);
          if (examples.unauthorized) examples.unauthorized.value.detail = 'The admin bearer token is missing or wrong.';
          response.content = {
            [PROBLEM_CONTENT_TYPE]: {
              ...response.content['application/json'],
              ...(Object.keys(examples).length > 0 ? { examples } : {}),
            },
          };
        }
        response.headers = { 'x-request-id': { $ref: '#/components/headers/RequestId' }, ...response.headers };
        if (status === '429' || status === '503')
          response.headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
      }
    }
  }
  document.components = {
    ...document.components,
    headers: { RequestId: COMPONENT_HEADERS.RequestId, RetryAfter: COMPONENT_HEADERS.RetryAfter },
  };
  document.security = [{ AdminToken: [] }];
  describeParameters(document);
  pruneUnusedSchemas(document);
  return document;
}

/**
 * The OpenAPI 3.1 documents, generated from the same zod schemas that validate requests and serialize
 * responses: the external API (`app.swagger()`) and, separately, the admin API (`app.adminSwagger()`).
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  // Shared error responses are added here once, as each route registers, not in every route file.
  app.addHook('onRoute', addErrorResponses);
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Pipeline Records API',
        version: '1.0.0',
        description: DESCRIPTION,
        license: LICENSE,
      },
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
        {
          name: 'events',
          description: 'The durable events feed: every event, as webhooks carry it, for the retention',
        },
      ],
    },
    transform: (input) => {
      const { url, route } = input as {
        url: string;
        route: { config?: { scope?: string; anyScope?: string[]; ndjson?: boolean; deprecation?: FieldDeprecation } };
      };
      // The document of the external API only (DECISIONS.md section 11): admin and ops routes are left out.
      if (!url.startsWith(EXT_PREFIX) || url === `${EXT_PREFIX}openapi.json`) return { schema: { hide: true }, url };
      const transformed = jsonSchemaTransform(input);
      const scope = route.config?.scope;
      const anyScope = route.config?.anyScope;
      // Alternatives in `security` mean "any one of them" (OpenAPI 3.1).
      (transformed.schema as Json).security = anyScope
        ? anyScope.map((alternative) => ({ ApiKeyAuth: [alternative] }))
        : [{ ApiKeyAuth: scope ? [scope] : [] }];
      if (scope) (transformed.schema as Json)['x-required-scope'] = scope;
      if (route.config?.ndjson) (transformed.schema as Json)['x-ndjson'] = true;
      if (route.config?.deprecation) (transformed.schema as Json)['x-deprecation'] = route.config.deprecation;
      return transformed;
    },
    transformObject: (input) => decorateDocument(jsonSchemaTransformObject(input) as Json) as never,
  });
  await app.register(fastifySwagger, {
    decorator: 'adminSwagger',
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Pipeline Records admin API', version: '1.0.0', description: ADMIN_DESCRIPTION, license: LICENSE },
      servers: [{ url: '/', description: 'This server' }],
      components: {
        securitySchemes: { AdminToken: { type: 'http', scheme: 'bearer', description: 'The ADMIN_TOKEN' } },
      },
      tags: [{ name: 'admin', description: 'Companies, users, pipelines, API keys and automations' }],
    },
    transform: (input) => {
      const { url } = input as { url: string };
      if (!url.startsWith(ADMIN_PREFIX) || url === `${ADMIN_PREFIX}openapi.json`)
        return { schema: { hide: true }, url };
      return jsonSchemaTransform(input);
    },
    transformObject: (input) => decorateAdminDocument(jsonSchemaTransformObject(input) as Json) as never,
  });
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route answers NDJSON (an export): the document shows its 200 as application/x-ndjson. */
    ndjson?: boolean;
  }
  interface FastifyInstance {
    adminSwagger: FastifyInstance['swagger'];
  }
}

/** Both documents are public, like the reference pages that render them (`/docs`, `/docs/admin`). */
export function registerOpenApiRoutes(app: FastifyInstance): void {
  app.get(`${EXT_PREFIX}openapi.json`, { schema: { hide: true } }, async () => app.swagger());
  app.get(`${ADMIN_PREFIX}openapi.json`, { schema: { hide: true } }, async () => app.adminSwagger());
}
