// `npx tsx scripts/hardening/error-cost.ts`: what the worst 400 bodies that fit in 1 MiB cost one web
// process (issue 16, finding 2). The web app runs in this process, where its event loop is measured
// (active time and longest stall while a request is handled); requests come from a forked client
// process, so the client's own JSON work is not counted. Prints one table.

import { fork } from 'node:child_process';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { must } from '../../src/shared/must.js';
import { ADMIN_TOKEN, startMeasuredApp } from './stack.js';

const BODY_LIMIT = 1024 * 1024;

interface Target {
  url: string;
  key: string;
  pipelineId: string;
  stageId: string;
  itemId: string;
}

interface Scenario {
  name: string;
  method: 'POST' | 'PATCH';
  path: (target: Target) => string;
  body: (target: Target) => string;
  headers?: Record<string, string>;
}

/** As many `"kNNNNNN":0` members as fit in what is left of 1 MiB after `prefix` and `suffix`. */
function manyKeys(prefix: string, suffix: string): string {
  const members: string[] = [];
  let size = prefix.length + suffix.length;
  for (let i = 0; ; i++) {
    const member = `"k${i}":0`;
    if (size + member.length + 1 > BODY_LIMIT) break;
    members.push(member);
    size += member.length + 1;
  }
  return prefix + members.join(',') + suffix;
}

/** As many `"x"` elements as fit in 1 MiB: each one a wrong option of a multi_select field. */
function manyElements(prefix: string, suffix: string): string {
  const count = Math.floor((BODY_LIMIT - prefix.length - suffix.length) / 4);
  return prefix + Array.from({ length: count }, () => '"x"').join(',') + suffix;
}

/** The widest body the shape check lets through: unknown keys (under 1,000) of arrays of 999 numbers, up to 1 MiB. */
function wideButAdmitted(prefix: string): string {
  const array = `[${Array.from({ length: 999 }, () => '0').join(',')}]`;
  const members: string[] = [];
  let size = prefix.length + 1;
  for (let i = 0; size + array.length + 12 < BODY_LIMIT; i++) {
    members.push(`"k${i}":${array}`);
    size += array.length + 12;
  }
  return prefix + members.join(',') + '}';
}

const itemHead = (t: Target) => `{"name":"x","pipeline_id":"${t.pipelineId}","stage_id":"${t.stageId}",`;

const SCENARIOS: Scenario[] = [
  {
    name: 'item create, unknown metadata keys',
    method: 'POST',
    path: () => '/v1/ext/items',
    body: (t) => manyKeys(`${itemHead(t)}"metadata":{`, '}}'),
  },
  {
    name: 'same, with an Idempotency-Key',
    method: 'POST',
    path: () => '/v1/ext/items',
    body: (t) => manyKeys(`${itemHead(t)}"metadata":{`, '}}'),
    headers: { 'idempotency-key': 'error-cost' },
  },
  {
    name: 'item update, unknown metadata keys',
    method: 'PATCH',
    path: (t) => `/v1/ext/items/${t.itemId}`,
    body: () => manyKeys('{"metadata":{', '}}'),
  },
  {
    name: 'item create, unknown top-level keys',
    method: 'POST',
    path: () => '/v1/ext/items',
    body: (t) => manyKeys(itemHead(t), '}'),
  },
  {
    name: 'item create, widest body the shape check admits',
    method: 'POST',
    path: () => '/v1/ext/items',
    body: (t) => wideButAdmitted(itemHead(t)),
    headers: { 'idempotency-key': 'error-cost-wide' },
  },
  {
    name: 'item create, multi_select of wrong options',
    method: 'POST',
    path: () => '/v1/ext/items',
    body: (t) => manyElements(`${itemHead(t)}"metadata":{"tags":[`, ']}}'),
  },
  {
    name: 'task create, unknown top-level keys',
    method: 'POST',
    path: () => '/v1/ext/tasks',
    body: () => manyKeys('{"title":"x","due_at":"2026-11-22T09:30:00Z",', '}'),
  },
  {
    name: 'hook subscribe, unknown top-level keys',
    method: 'POST',
    path: () => '/v1/ext/hooks',
    body: () => manyKeys('{"target_url":"https://example.com/h","event":"item.created",', '}'),
  },
  {
    name: 'check-duplicates, unknown top-level keys',
    method: 'POST',
    path: () => '/v1/ext/items/check-duplicates',
    body: (t) => manyKeys(`{"pipeline_id":"${t.pipelineId}",`, '}'),
  },
];

// ---- client side (forked): sends the requests, reports what a caller sees ----

async function send(target: Target, scenario: Scenario, body: string) {
  const started = performance.now();
  const response = await fetch(target.url + scenario.path(target), {
    method: scenario.method,
    headers: { 'content-type': 'application/json', 'x-api-key': target.key, ...scenario.headers },
    body,
  });
  const text = await response.text();
  const parsed = JSON.parse(text) as { errors?: unknown[]; errors_truncated?: boolean };
  return {
    status: response.status,
    ms: performance.now() - started,
    bytes: text.length,
    errors: parsed.errors?.length ?? 0,
    truncated: parsed.errors_truncated === true,
  };
}

async function healthz(url: string): Promise<number> {
  const started = performance.now();
  await (await fetch(`${url}/healthz`)).text();
  return performance.now() - started;
}

function ask(message: object): Promise<{ activeMs: number; maxDelayMs: number }> {
  return new Promise((resolve) => {
    process.once('message', (answer) => resolve(answer as { activeMs: number; maxDelayMs: number }));
    process.send!(message);
  });
}

async function client(target: Target): Promise<void> {
  const rows: object[] = [];
  for (const scenario of SCENARIOS) {
    const body = scenario.body(target);
    await send(target, scenario, body); // warm-up (schemas compiled, caches filled)
    let worst: { activeMs: number; maxDelayMs: number } | undefined;
    let seen: Awaited<ReturnType<typeof send>> | undefined;
    for (let run = 0; run < 3; run++) {
      await ask({ begin: scenario.name });
      seen = await send(target, scenario, body);
      const loop = await ask({ end: scenario.name });
      if (!worst || loop.activeMs > worst.activeMs) worst = loop;
    }
    rows.push({
      scenario: scenario.name,
      'body KiB': Math.round(body.length / 1024),
      status: seen!.status,
      'answer KiB': Math.round(seen!.bytes / 1024),
      'errors[]': seen!.errors + (seen!.truncated ? ' (truncated)' : ''),
      'loop active ms': worst!.activeMs.toFixed(1),
      'longest stall ms': worst!.maxDelayMs.toFixed(1),
    });
  }
  console.table(rows);

  // /healthz while four of the first scenario's bodies are handled at once.
  const scenario = must(SCENARIOS[0], 'a scenario');
  const body = scenario.body(target);
  const idle: number[] = [];
  for (let i = 0; i < 20; i++) idle.push(await healthz(target.url));
  const during: number[] = [];
  let running = true;
  const probe = (async () => {
    while (running) {
      during.push(await healthz(target.url));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  await Promise.all(Array.from({ length: 4 }, () => send(target, scenario, body)));
  running = false;
  await probe;
  const max = (values: number[]) => Math.max(...values).toFixed(1);
  const median = (values: number[]) =>
    ([...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN).toFixed(1);
  console.log(
    `/healthz idle: median ${median(idle)} ms, max ${max(idle)} ms; ` +
      `while 4 "${scenario.name}" run in parallel: median ${median(during)} ms, max ${max(during)} ms (${during.length} probes)`,
  );
  process.exit(0);
}

// ---- server side: the web app, measured ----

async function server(): Promise<void> {
  const stack = await startMeasuredApp();
  const { app, url } = stack;

  const adminCall = async (method: 'POST', path: string, payload: object) => {
    const response = await app.inject({
      method,
      url: `/v1/admin${path}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload,
    });
    if (response.statusCode !== 201) throw new Error(`${path}: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const company = await adminCall('POST', '/companies', { name: 'Cost' });
  const user = await adminCall('POST', `/companies/${company.company_id}/users`, { name: 'A', email: 'a@example.com' });
  const pipeline = await adminCall('POST', `/companies/${company.company_id}/pipelines`, {
    name: 'P',
    stages: [{ name: 'S' }],
    fields: [
      { name: 'deal_value', type: 'number' },
      { name: 'tags', type: 'multi_select', options: ['a', 'b'] },
    ],
  });
  const key = await adminCall('POST', `/companies/${company.company_id}/api-keys`, {
    name: 'k',
    created_by: user.user_id,
  });
  const item = await app.inject({
    method: 'POST',
    url: '/v1/ext/items',
    headers: { 'x-api-key': key.key },
    payload: { name: 'x', pipeline_id: pipeline.pipeline_id, stage_id: pipeline.stages[0].stage_id },
  });
  const target: Target = {
    url,
    key: key.key,
    pipelineId: pipeline.pipeline_id,
    stageId: pipeline.stages[0].stage_id,
    itemId: item.json().item_id,
  };

  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  let since = performance.eventLoopUtilization();
  const child = fork(new URL(import.meta.url).pathname, ['client'], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ERROR_COST_TARGET: JSON.stringify(target) },
  });
  child.on('message', (message: { begin?: string; end?: string }) => {
    if (message.begin) {
      delay.reset();
      since = performance.eventLoopUtilization();
      child.send({});
    } else {
      const used = performance.eventLoopUtilization(since);
      child.send({ activeMs: used.active, maxDelayMs: delay.max / 1e6 });
    }
  });
  await new Promise((resolve) => child.on('exit', resolve));
  await stack.close();
}

if (process.argv[2] === 'client') await client(JSON.parse(process.env.ERROR_COST_TARGET!) as Target);
else await server();
