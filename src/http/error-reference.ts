import type { FastifyInstance } from 'fastify';

/**
 * Every problem `code` the service answers with, and the page that explains them: a problem's `type`
 * is `/docs/errors#<code>` (RFC 9457 allows a relative reference; it resolves against the API's own
 * address, so it works behind any host name). docs/errors.md says the same at more length; a test
 * holds both to this list and this list to every code thrown in src/.
 */
export const ERROR_REFERENCE_PATH = '/docs/errors';

interface ErrorEntry {
  status: number;
  title: string;
  meaning: string;
  /** Which operations can answer with it (for the OpenAPI examples); every one when absent. */
  appliesTo?: (method: string, path: string) => boolean;
}

const withBody = (method: string) => method === 'POST' || method === 'PUT' || method === 'PATCH';
const update = (method: string) => method === 'PUT' || method === 'PATCH' || method === 'DELETE';
const itemUpdate = (method: string, path: string) => update(method) && path.includes('/items/');

export const ERROR_CATALOGUE: Readonly<Record<string, ErrorEntry>> = {
  invalid_json: { status: 400, title: 'Invalid JSON', meaning: 'The body is not valid JSON.', appliesTo: withBody },
  validation_failed: {
    status: 400,
    title: 'Validation failed',
    meaning:
      'The request does not pass its checks: a wrong type, a missing required or an unknown field, a value out of range, a bad query parameter, or an id that does not resolve in your company. errors[] lists every problem, each with the path of its field.',
  },
  bad_request: {
    status: 400,
    title: 'Bad request',
    meaning:
      'The request is malformed at the HTTP level (a malformed URL, a Content-Length that does not match the body).',
  },
  hook_limit_reached: {
    status: 400,
    title: 'Hook limit reached',
    meaning:
      'The company already has the most hooks it may have (HOOK_MAX_PER_COMPANY, 25 by default); delete one first.',
    appliesTo: (method, path) => method === 'POST' && path.endsWith('/hooks'),
  },
  unauthorized: {
    status: 401,
    title: 'Unauthorized',
    meaning:
      'The x-api-key header is missing, or the key is unknown, revoked or expired (admin API: the bearer token).',
  },
  subscription_inactive: {
    status: 402,
    title: 'Subscription inactive',
    meaning: "The key's company has no active subscription.",
  },
  insufficient_scope: {
    status: 403,
    title: 'Insufficient scope',
    meaning: 'The key lacks the scope this operation needs; required_scope names it.',
  },
  not_found: {
    status: 404,
    title: 'Not found',
    meaning:
      "The route does not exist, or the resource does not exist in your company (another company's id and a malformed id answer the same).",
  },
  version_conflict: {
    status: 409,
    title: 'Version conflict',
    meaning: 'The item update sent a version that is no longer current; current_version holds it. Nothing changed.',
    appliesTo: itemUpdate,
  },
  idempotency_in_progress: {
    status: 409,
    title: 'Request in progress',
    meaning: 'A request with the same Idempotency-Key is still running; retry shortly.',
    appliesTo: (method) => method === 'POST',
  },
  hook_exists: {
    status: 409,
    title: 'Hook exists',
    meaning:
      'A hook with this target_url and these events exists already; the answer names its hook_id (never its secret). Rotate its secret if it was lost.',
    appliesTo: (method, path) => method === 'POST' && path.endsWith('/hooks'),
  },
  recovery_in_progress: {
    status: 409,
    title: 'Recovery in progress',
    meaning:
      'A recovery of this hook is still sending; one runs per hook at a time. The answer names its since and until; retry once it has finished.',
    appliesTo: (method, path) => method === 'POST' && path.endsWith('/recover'),
  },
  external_id_taken: {
    status: 409,
    title: 'External id taken',
    meaning: 'Another item of your company already has this external_id.',
    appliesTo: (method, path) => withBody(method) && path.includes('/items'),
  },
  request_timeout: {
    status: 408,
    title: 'Request timeout',
    meaning: 'The request did not arrive whole in time (REQUEST_TIMEOUT_MS, 30 s by default; headers within 10 s).',
  },
  precondition_failed: {
    status: 412,
    title: 'Precondition failed',
    meaning:
      "If-Match does not match the record's current ETag (strong comparison: a weak W/ tag never matches); current_version holds the version. Nothing changed.",
    appliesTo: update,
  },
  payload_too_large: {
    status: 413,
    title: 'Payload too large',
    meaning: 'The body is larger than 1 MiB.',
    appliesTo: withBody,
  },
  headers_too_large: {
    status: 431,
    title: 'Request headers too large',
    meaning: 'The request headers are larger than the server accepts.',
  },
  unsupported_media_type: {
    status: 415,
    title: 'Unsupported media type',
    meaning: 'A body was sent without content-type: application/json.',
    appliesTo: withBody,
  },
  idempotency_mismatch: {
    status: 422,
    title: 'Idempotency key reused',
    meaning: 'The Idempotency-Key was used (by this API key, within 24 hours) with a different body.',
    appliesTo: (method) => method === 'POST',
  },
  rate_limited: {
    status: 429,
    title: 'Too many requests',
    meaning:
      'The API key used up its quota, or an address sent too many unknown keys or wrong admin tokens. Retry-After says how many seconds to wait; the RateLimit-* headers show the quota.',
  },
  internal: {
    status: 500,
    title: 'Internal error',
    meaning: 'A bug on our side. The answer carries only the request_id; quote it.',
  },
  unavailable: {
    status: 503,
    title: 'Service unavailable',
    meaning:
      'MongoDB is unreachable, or a write without a version lost every retry to concurrent writers. Nothing changed: retry after Retry-After seconds, with the same Idempotency-Key.',
  },
};

export function errorTypeUri(code: string): string {
  return `${ERROR_REFERENCE_PATH}#${code}`;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

function renderErrorReference(): string {
  const sections = Object.entries(ERROR_CATALOGUE)
    .map(
      ([code, entry]) =>
        `<section id="${code}"><h2><a href="#${code}">${code}</a> <small>${entry.status} ${escapeHtml(entry.title)}</small></h2><p>${escapeHtml(entry.meaning)}</p></section>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Errors - Pipeline Records API</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}small{color:#666;font-weight:normal}section:target{background:#fff8d6}</style>
</head><body>
<h1>Errors</h1>
<p>Every error is an RFC 9457 problem document (<code>application/problem+json</code>) with a stable <code>code</code>; its <code>type</code> links to the code's entry on this page. <a href="/docs">API reference</a></p>
${sections}
</body></html>
`;
}

export function registerErrorReference(app: FastifyInstance): void {
  const page = renderErrorReference();
  app.get(ERROR_REFERENCE_PATH, { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').send(page),
  );
}
