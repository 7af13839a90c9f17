import fc from 'fast-check';
import { TEST_ADMIN_TOKEN } from '../../helpers/app.js';
import { responseProblems } from './checks.js';
import { pathValueArbitrary, queryArbitrary, wireBodyArbitrary, type WireBody } from './mutations.js';
import { anyJson, jsonSchemaOf, schemaArbitrary, timestampArb, type Hints } from './schema-arbitrary.js';
import type { FuzzWorld } from './world.js';
import type { FastifyInstance } from 'fastify';
import type { Db } from 'mongodb';

/** Routes that are not JSON APIs of a company (docs, metrics, the queue board, the OpenAPI document). */
const SKIPPED = /^\/(docs|metrics|admin\/queues|healthz|readyz)|^\/v1\/(ext|admin)\/openapi\.json$/;

export interface FuzzTarget {
  api: 'ext' | 'admin';
  method: string;
  url: string;
  schema: { params?: unknown; querystring?: unknown; body?: unknown };
}

/** Every `/v1/ext/` and `/v1/admin/` route the app registered, walked from `app.routeTable`; deletes last, so the others still find the seeded records. */
export function fuzzTargets(app: FastifyInstance): FuzzTarget[] {
  const targets = app.routeTable.flatMap((route): FuzzTarget[] => {
    const methods = ([] as string[]).concat(route.method).filter((method) => method !== 'HEAD' && method !== 'OPTIONS');
    const api = route.url.startsWith('/v1/ext/') ? 'ext' : route.url.startsWith('/v1/admin/') ? 'admin' : undefined;
    if (!api || SKIPPED.test(route.url)) return [];
    return methods.map((method) => ({
      api,
      method,
      url: route.url,
      schema: route.schema ?? {},
    }));
  });
  return [
    ...targets.filter((target) => target.method !== 'DELETE'),
    ...targets.filter((target) => target.method === 'DELETE'),
  ];
}

export interface FuzzFailure {
  route: string;
  seed: number;
  caseIndex: number;
  request: string;
  status: number;
  problems: string[];
  body: string;
}

export interface RouteStats {
  route: string;
  cases: number;
  statuses: Record<number, number>;
  failures: FuzzFailure[];
}

interface FuzzCase {
  path: Record<string, string>;
  query: { label: string; query: string };
  body: WireBody | undefined;
  credential: 'valid' | 'missing' | 'malformed';
  idempotencyKey: string | undefined;
}

const junkId = fc.oneof(
  fc.constantFrom('', 'nope', 'itm_000000000000000000000000', '{"$gt":""}'),
  fc.string({ maxLength: 20 }),
);
const mix = (own: string[], foreign: string[]) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...own) },
    { weight: 1, arbitrary: fc.constantFrom(...foreign) },
    { weight: 1, arbitrary: junkId },
  );

/** Valid-looking values by field name: mostly the caller's own records, sometimes the foreign company's. */
function hintsFor(world: FuzzWorld, api: 'ext' | 'admin'): Hints {
  const mine = api === 'ext' ? world.own : world.sandbox;
  const { foreign } = world;
  const user = mix([mine.userId], [foreign.userId]);
  return {
    pipeline_id: mix([mine.pipelineId], [foreign.pipelineId]),
    stage_id: mix(mine.stageIds, foreign.stageIds),
    status_id: fc.oneof(mix(mine.statusIds, foreign.statusIds), fc.constant(null)),
    item_id: mix([mine.itemId], [foreign.itemId]),
    assigned_to: user,
    created_by: user,
    automation_id: mix([mine.automationId], [foreign.automationId]),
    version: fc.integer({ min: 0, max: 4 }),
    limit: fc.integer({ min: -1, max: 202 }),
    target_url: fc.constantFrom(
      'https://hooks.example.com/fuzz',
      'http://127.0.0.1:9/fuzz',
      'http://2130706433/',
      'https://[::ffff:127.0.0.1]/',
      'file:///etc/passwd',
    ),
    url: fc.constantFrom('https://hooks.example.com/fuzz', 'http://127.0.0.1:9/fuzz'),
    due_at: timestampArb,
    metadata: fc.record(
      {
        deal_value: fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })),
        industry: fc.constantFrom('software', 'retail', 'software', 'other'),
        notes_text: fc.string({ maxLength: 20 }),
      },
      { requiredKeys: [] },
    ),
  };
}

/** Path values by parameter name. Admin calls stay in the sandbox company; every other id may be foreign. */
function pathIds(world: FuzzWorld, api: 'ext' | 'admin', param: string): string[] {
  const mine = api === 'ext' ? world.own : world.sandbox;
  const { foreign } = world;
  const ids: Record<string, string[]> = {
    company_id: [world.sandbox.companyId],
    item_id: [mine.itemId, foreign.itemId],
    task_id: [mine.taskId, foreign.taskId],
    hook_id: [mine.hookId, foreign.hookId],
    pipeline_id: [mine.pipelineId, foreign.pipelineId],
    event_id: [mine.eventId, foreign.eventId],
    key_id: [mine.keyId, foreign.keyId],
    automation_id: [mine.automationId, foreign.automationId],
  };
  return ids[param] ?? ['x'];
}

function caseArbitrary(world: FuzzWorld, target: FuzzTarget): fc.Arbitrary<FuzzCase> {
  const hints = hintsFor(world, target.api);
  const params = [...target.url.matchAll(/:([A-Za-z_]+)/g)].flatMap((match) =>
    match[1] === undefined ? [] : [match[1]],
  );
  const path = fc.record(
    Object.fromEntries(params.map((param) => [param, pathValueArbitrary(pathIds(world, target.api, param))])),
  );

  const querySchema = jsonSchemaOf(target.schema.querystring);
  // A few parameters at a time, so that some queries are entirely valid.
  const queryBase = querySchema
    ? fc
        .tuple(
          schemaArbitrary(querySchema, querySchema, hints),
          fc.subarray(Object.keys(querySchema.properties ?? {}), {
            maxLength: Math.min(2, Object.keys(querySchema.properties ?? {}).length),
          }),
        )
        .map(([value, chosen]) =>
          Object.fromEntries(
            Object.entries(value as Record<string, unknown>)
              .filter(([key, entry]) => chosen.includes(key) && entry != null)
              .map(([key, entry]) => [key, String(entry)]),
          ),
        )
    : fc.constant<Record<string, string>>({});
  const query = querySchema
    ? queryArbitrary(queryBase)
    : fc.oneof(
        { weight: 5, arbitrary: fc.constant({ label: 'none', query: '' }) },
        { weight: 1, arbitrary: queryArbitrary(queryBase) },
      );

  const bodySchema = jsonSchemaOf(target.schema.body);
  const body = bodySchema
    ? wireBodyArbitrary(schemaArbitrary(bodySchema, bodySchema, hints))
    : fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: wireBodyArbitrary(anyJson) });

  return fc.record({
    path,
    query,
    body,
    credential: fc.constantFrom(
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'valid',
      'missing',
      'malformed',
    ),
    idempotencyKey:
      target.method === 'POST'
        ? fc.option(fc.oneof(fc.uuid(), fc.string({ maxLength: 300 })), { nil: undefined })
        : fc.constant(undefined),
  });
}

function credentialHeaders(
  world: FuzzWorld,
  api: 'ext' | 'admin',
  credential: FuzzCase['credential'],
): Record<string, string> {
  if (credential === 'missing') return {};
  if (api === 'ext') return { 'x-api-key': credential === 'valid' ? world.own.key : 'prk_short' };
  return { authorization: credential === 'valid' ? `Bearer ${TEST_ADMIN_TOKEN}` : 'Bearer wrong' };
}

const excerpt = (value: string | Buffer | undefined, length = 200) =>
  value === undefined ? '' : String(value).slice(0, length);

export interface FuzzOptions {
  numRuns: number;
  seed: number;
}

/** Sends `numRuns` generated requests to one route and checks every response; never stops at a failure. */
export async function fuzzRoute(
  app: FastifyInstance,
  world: FuzzWorld,
  target: FuzzTarget,
  options: FuzzOptions,
): Promise<RouteStats> {
  const route = `${target.method} ${target.url}`;
  const stats: RouteStats = { route, cases: 0, statuses: {}, failures: [] };
  const cases = fc.sample(caseArbitrary(world, target), { numRuns: options.numRuns, seed: options.seed });
  for (const [caseIndex, fuzzCase] of cases.entries()) {
    const url =
      target.url.replace(/:([A-Za-z_]+)/g, (_, name: string) => fuzzCase.path[name] ?? '') + fuzzCase.query.query;
    const headers: Record<string, string> = { ...credentialHeaders(world, target.api, fuzzCase.credential) };
    if (fuzzCase.body?.contentType) headers['content-type'] = fuzzCase.body.contentType;
    if (fuzzCase.idempotencyKey !== undefined) headers['idempotency-key'] = fuzzCase.idempotencyKey;
    const response = await app.inject({
      method: target.method as 'GET',
      url,
      headers,
      // Malformed keys are guesses: from an address of their own, so that once the failed-auth throttle
      // blocks it (every request from a blocked address is 429), the valid key's cases still get through.
      ...(fuzzCase.credential === 'malformed' ? { remoteAddress: '192.0.2.66' } : {}),
      ...(fuzzCase.body?.payload !== undefined ? { payload: fuzzCase.body.payload } : {}),
    });
    stats.cases += 1;
    stats.statuses[response.statusCode] = (stats.statuses[response.statusCode] ?? 0) + 1;
    const problems = responseProblems(response, {
      api: target.api,
      method: target.method,
      route: target.url,
      foreignMarkers: world.foreignMarkers,
    });
    if (problems.length > 0) {
      const labels = `query:${fuzzCase.query.label} body:${fuzzCase.body?.label ?? 'none'} auth:${fuzzCase.credential}`;
      stats.failures.push({
        route,
        seed: options.seed,
        caseIndex,
        status: response.statusCode,
        problems,
        body: excerpt(response.body, 500),
        request: `${target.method} ${excerpt(url)} [${labels}] ${excerpt(fuzzCase.body?.payload)}`,
      });
    }
  }
  return stats;
}

/** The foreign company's records, to prove that no fuzzed call changed them. */
export async function foreignSnapshot(db: Db, companyId: string): Promise<string> {
  const collections = [
    'items',
    'tasks',
    'hooks',
    'deliveries',
    'hook_recoveries',
    'api_keys',
    'automations',
    'pipelines',
    'users',
    'webhook_secrets',
  ];
  // last_used_at is written in the background by the key's own earlier use, not by anything fuzzed.
  const docs = await Promise.all(
    collections.map((name) =>
      db
        .collection(name)
        .find({ company_id: companyId }, { projection: { last_used_at: 0 } })
        .sort({ _id: 1 })
        .toArray(),
    ),
  );
  const company = await db.collection('companies').findOne({ _id: companyId as never });
  return JSON.stringify({ docs, company });
}

/** One line per route: cases, statuses seen and failures. */
export function summaryTable(stats: RouteStats[]): string {
  const rows = stats.map((entry) => [
    entry.route,
    String(entry.cases),
    Object.entries(entry.statuses)
      .map(([status, count]) => `${status}×${count}`)
      .join(' '),
    String(entry.failures.length),
  ]);
  const header = ['route', 'cases', 'statuses seen', 'failures'];
  const total = [
    'TOTAL',
    String(stats.reduce((sum, entry) => sum + entry.cases, 0)),
    '',
    String(stats.reduce((sum, entry) => sum + entry.failures.length, 0)),
  ];
  const all = [header, ...rows, total];
  const widths = header.map((_, column) => Math.max(...all.map((row) => row[column]?.length ?? 0)));
  return all.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ')).join('\n');
}
