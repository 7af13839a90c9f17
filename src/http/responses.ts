import { z } from 'zod';
import { problemSchema } from './problem.js';
import type { RouteOptions } from 'fastify';

type ErrorStatus = 400 | 401 | 402 | 403 | 404 | 409 | 412 | 413 | 415 | 422 | 429 | 503;

const EXT_PREFIX = '/v1/ext/';
const ADMIN_PREFIX = '/v1/admin/';

/** Errors every authenticated `/v1/ext/` route can answer with (input, key, subscription, scope, quota, MongoDB). */
const EXT_ERRORS: readonly ErrorStatus[] = [400, 401, 402, 403, 429, 503];

/**
 * Operations that honour If-Match (412 when stale), and what the header is compared with; keys are
 * `method path` as the OpenAPI document spells them. The OpenAPI layer documents the header from this.
 */
export const IF_MATCH: Readonly<Record<string, string>> = {
  'patch /v1/ext/items/{item_id}': 'The ETag (`"<version>"`) the update expects; 412 when stale or weak (`W/`)',
  'delete /v1/ext/items/{item_id}': 'The ETag (`"<version>"`) the deletion expects; 412 when stale or weak (`W/`)',
  'put /v1/ext/items/by-external-id/{external_id}':
    'The ETag (`"<version>"`) the update expects; 412 when stale or weak (`W/`), and when no item has this external_id yet',
  'delete /v1/ext/tasks/{task_id}':
    "The task's ETag (from GET, POST or PATCH) the deletion expects; 412 when stale or weak (`W/`)",
};

/**
 * The error statuses a documented route answers with, from what the route is rather than a list in
 * every route file: the error model (DECISIONS.md section 2) says which checks each kind of route runs.
 */
export function errorStatusesOf(method: string, url: string, schema: RouteOptions['schema']): ErrorStatus[] {
  const verb = method.toUpperCase();
  const hasId = url.includes(':');
  const hasBody = schema?.body !== undefined;
  if (url.startsWith(ADMIN_PREFIX)) {
    // The bearer token (401) and the failed-auth throttle of its address (429), input (400) when there is
    // any, the company or record named in the path (404), and MongoDB unreachable or a write that lost
    // every retry to concurrent writers (503).
    const statuses: ErrorStatus[] = [401, 429];
    if (hasBody || schema?.querystring !== undefined) statuses.push(400);
    if (hasId) statuses.push(404);
    statuses.push(503);
    return statuses;
  }
  const statuses = [...EXT_ERRORS];
  // A PUT upserts: an id that names nothing yet is created, never a 404.
  if (hasId && verb !== 'PUT') statuses.push(404);
  // POST: a retry while the first request with its Idempotency-Key runs (409) or with another body (422).
  // Item writes: version_conflict and external_id_taken.
  const itemWrite = hasBody && url.startsWith(`${EXT_PREFIX}items`);
  if (verb === 'POST' || itemWrite) statuses.push(409);
  const openApiPath = url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
  if (IF_MATCH[`${verb.toLowerCase()} ${openApiPath}`]) statuses.push(412);
  if (hasBody) statuses.push(413, 415);
  if (verb === 'POST') statuses.push(422);
  return statuses;
}

/**
 * Adds the problem+json error responses to every JSON route under `/v1/ext/` and `/v1/admin/` as it
 * registers (an onRoute hook), so route files declare only their success responses. A status a route
 * declares itself is kept.
 */
export function addErrorResponses(route: RouteOptions): void {
  const response = route.schema?.response as Record<string, unknown> | undefined;
  if (!response || route.schema?.hide) return;
  if (!route.url.startsWith(EXT_PREFIX) && !route.url.startsWith(ADMIN_PREFIX)) return;
  for (const method of [route.method].flat()) {
    if (method === 'HEAD') continue;
    for (const status of errorStatusesOf(method, route.url, route.schema)) response[status] ??= problemSchema;
  }
}

export const noContent = z.null().describe('No content');
