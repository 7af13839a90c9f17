/** What no response may ever show, whatever the request (issue 10's fuzzing properties). */

export interface ResponseLike {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}

export interface CheckContext {
  api: 'ext' | 'admin';
  method: string;
  /** The route pattern, e.g. `/v1/ext/hooks`. */
  route: string;
  /** Ids and distinctive names of a company the caller must never see. */
  foreignMarkers: string[];
}

const PROBLEM_MEMBERS = ['type', 'title', 'status', 'code', 'request_id'] as const;
const STACK_TRACE = /at .*\.(ts|js):\d+/;
const DRIVER_MESSAGE = /Mongo|E11000|BSON/;
const ALWAYS_INTERNAL = new Set([
  '_id',
  'key_hash',
  'pending_events',
  'dup_tokens',
  'outbox_pending',
  'revision',
  'overdue_fired_for',
  'overdue_fired_dues',
]);

/** Every object key anywhere in a parsed JSON value. */
function collectKeys(value: unknown, into: Set<string>): Set<string> {
  if (Array.isArray(value)) value.forEach((entry) => collectKeys(entry, into));
  else if (value && typeof value === 'object') {
    for (const [key, entry] of Object.entries(value)) {
      into.add(key);
      collectKeys(entry, into);
    }
  }
  return into;
}

/** The broken properties of one response; empty when it is fine. */
export function responseProblems(response: ResponseLike, context: CheckContext): string[] {
  const problems: string[] = [];
  const { statusCode: status, body } = response;
  const header = response.headers['content-type'];
  const contentType = typeof header === 'string' ? header : '';
  if (status >= 500) problems.push(`server error ${status}`);

  let parsed: unknown;
  if (contentType.startsWith('application/x-ndjson')) {
    // An export: one JSON document per line, each ending in a newline.
    try {
      if (body.length > 0 && !body.endsWith('\n')) throw new Error('unterminated line');
      parsed = body
        .split('\n')
        .filter((line) => line.length > 0)
        .map((line) => JSON.parse(line) as unknown);
    } catch {
      problems.push('body is not the NDJSON its content-type says');
    }
  } else if (/json/.test(contentType) && body.length > 0) {
    try {
      parsed = JSON.parse(body);
    } catch {
      problems.push('body is not the JSON its content-type says');
    }
  }
  if (status >= 400) {
    if (!contentType.startsWith('application/problem+json'))
      problems.push(`${status} with content-type "${contentType}"`);
    const problem = (parsed ?? {}) as Record<string, unknown>;
    const missing = PROBLEM_MEMBERS.filter((member) => problem[member] === undefined || problem[member] === null);
    if (missing.length > 0) problems.push(`problem body lacks ${missing.join(', ')}`);
    if (problem.status !== undefined && problem.status !== status)
      problems.push(`problem status ${JSON.stringify(problem.status)} on a ${status}`);
  }

  const keys = collectKeys(parsed, new Set());
  for (const key of keys) {
    if (ALWAYS_INTERNAL.has(key) || (context.api === 'ext' && key === 'company_id'))
      problems.push(`internal field "${key}" in the body`);
  }
  // A hook's secret is shown at creation and on rotation, and nowhere else (DECISIONS.md section 12.2).
  const createsHook =
    context.api === 'ext' && context.method === 'POST' && context.route === '/v1/ext/hooks' && status === 201;
  const rotatesSecret =
    context.api === 'ext' && context.route === '/v1/ext/hooks/:hook_id/rotate-secret' && status === 200;
  // The admin API hands out the company's automation signing secret on purpose, and only there.
  const showsAutomationSecret =
    context.api === 'admin' && context.route.endsWith('/automation-webhook-secret') && status === 200;
  if (body.includes('whsec_') && !createsHook && !rotatesSecret && !showsAutomationSecret)
    problems.push('a webhook secret in the body');
  if (STACK_TRACE.test(body)) problems.push('a stack trace in the body');
  if (DRIVER_MESSAGE.test(body)) problems.push('a database driver message in the body');
  const leaked = context.foreignMarkers.filter((marker) => body.includes(marker));
  if (leaked.length > 0) problems.push(`another company's data in the body: ${leaked.join(', ')}`);
  return problems;
}
