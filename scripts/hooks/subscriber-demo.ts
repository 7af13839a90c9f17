/**
 * A REST-hook subscriber end to end, against a running server (`npm run dev`, which allows loopback
 * targets): subscribe with two events and a pipeline filter, receive real events, ping, rotate the
 * secret, and verify every delivery with the `standardwebhooks` library, with either secret during
 * the overlap; then PATCH the hook to a `changes` filter (a deal moved into Won, not a rename), live
 * through an outage and recover what it missed. Prints a transcript.
 *
 *   BASE=http://127.0.0.1:3000 ADMIN=<admin token> npx tsx scripts/hooks/subscriber-demo.ts
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { Webhook } from 'standardwebhooks';
import type { AddressInfo } from 'node:net';

const BASE = process.env.BASE ?? 'http://127.0.0.1:3000';
const ADMIN = process.env.ADMIN ?? '';
if (!ADMIN) throw new Error('set ADMIN to the admin token npm run dev printed');

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}
const inbox: Received[] = [];
let answerStatus = 200;

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function call(method: string, path: string, auth: Record<string, string>, body?: unknown) {
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? (JSON.parse(text) as Record<string, any>) : {} }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function waitFor<T>(check: () => T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const found = check();
    if (found !== undefined) return found;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

function verifies(secret: string, request: Received): boolean {
  try {
    new Webhook(secret).verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });
    return true;
  } catch {
    return false;
  }
}

const short = (value: string) => (value.length > 22 ? `${value.slice(0, 18)}…` : value);

async function main(): Promise<void> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      inbox.push({ headers: req.headers, body });
      res
        .writeHead(answerStatus, { 'content-type': 'text/plain' })
        .end(answerStatus === 200 ? 'ok' : 'busy, try later');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const target = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  log(`receiver listening on ${target}`);

  const admin = { authorization: `Bearer ${ADMIN}` };
  const company = (await call('POST', '/v1/admin/companies', admin, { name: 'Demo' })).json;
  const user = (
    await call('POST', `/v1/admin/companies/${company.company_id}/users`, admin, {
      name: 'Ada',
      email: `ada-${Date.now()}@demo.example`,
    })
  ).json;
  const pipelines = await Promise.all(
    ['Sales', 'Support'].map(
      async (name) =>
        (
          await call('POST', `/v1/admin/companies/${company.company_id}/pipelines`, admin, {
            name,
            stages: [{ name: 'Lead' }, { name: 'Won' }],
            statuses: [{ name: 'Open' }],
          })
        ).json,
    ),
  );
  const [sales, support] = pipelines as [Record<string, any>, Record<string, any>]; // eslint-disable-line @typescript-eslint/no-explicit-any
  const key = (
    await call('POST', `/v1/admin/companies/${company.company_id}/api-keys`, admin, {
      name: 'demo',
      created_by: user.user_id,
    })
  ).json.key as string;
  const api = { 'x-api-key': key };

  log('\n# subscribe: two events, filtered to the Sales pipeline');
  const body = {
    target_url: target,
    events: ['item.created', 'task.created'],
    filter: { pipeline_id: sales.pipeline_id },
  };
  log(`POST /v1/ext/hooks ${JSON.stringify({ ...body, target_url: '<receiver>' })}`);
  const subscribed = await call('POST', '/v1/ext/hooks', api, body);
  const hook = subscribed.json;
  log(`→ ${subscribed.status} ${JSON.stringify({ ...hook, target_url: '<receiver>', secret: short(hook.secret) })}`);
  const again = await call('POST', '/v1/ext/hooks', api, body);
  log(
    `same again → ${again.status} code=${again.json.code} hook_id=${again.json.hook_id} secret shown: ${JSON.stringify(again.json).includes('whsec_')}`,
  );

  log('\n# events: an item in Sales and a task on it (delivered), an item in Support (filtered out)');
  const item = (
    await call('POST', '/v1/ext/items', api, {
      name: 'Acme renewal',
      pipeline_id: sales.pipeline_id,
      stage_id: sales.stages[0].stage_id,
    })
  ).json;
  await call('POST', '/v1/ext/items', api, {
    name: 'Ticket',
    pipeline_id: support.pipeline_id,
    stage_id: support.stages[0].stage_id,
  });
  await call('POST', '/v1/ext/tasks', api, {
    title: 'Call Acme',
    due_at: '2030-01-01T10:00:00Z',
    item_id: item.item_id,
  });
  await waitFor(() => (inbox.length >= 2 ? true : undefined), 'two deliveries');
  await sleep(500); // anything filtered in by mistake would have arrived by now
  for (const request of inbox) {
    const payload = JSON.parse(request.body);
    log(
      `received ${payload.type} webhook-id=${String(request.headers['webhook-id'])} data.${payload.type.startsWith('item') ? `pipeline=${payload.data.pipeline}` : `item_id=${payload.data.item_id}`} signatures=${String(request.headers['webhook-signature']).split(' ').length} verifies(secret)=${verifies(hook.secret, request)}`,
    );
  }
  log(`deliveries received: ${inbox.length} (the Support item was not sent)`);

  log('\n# ping');
  const ping = await call('POST', `/v1/ext/hooks/${hook.hook_id}/test`, api);
  log(`POST /v1/ext/hooks/${hook.hook_id}/test → ${ping.status} ${JSON.stringify(ping.json)}`);
  const pinged = await waitFor(
    () => inbox.find((request) => request.headers['webhook-id'] === ping.json.event_id),
    'the ping',
  );
  log(`received ${pinged.body}`);
  log(`verifies(secret)=${verifies(hook.secret, pinged)}`);

  log('\n# rotate the secret');
  const rotated = await call('POST', `/v1/ext/hooks/${hook.hook_id}/rotate-secret`, api);
  log(
    `POST /v1/ext/hooks/${hook.hook_id}/rotate-secret → ${rotated.status} ${JSON.stringify({ ...rotated.json, secret: short(rotated.json.secret) })}`,
  );
  await call('POST', '/v1/ext/tasks', api, {
    title: 'Send contract',
    due_at: '2030-01-02T10:00:00Z',
    item_id: item.item_id,
  });
  const ping2 = await call('POST', `/v1/ext/hooks/${hook.hook_id}/test`, api);
  const afterRotation = await waitFor(
    () => inbox.find((request) => request.headers['webhook-id'] === ping2.json.event_id),
    'the second ping',
  );
  const taskAfter = await waitFor(
    () => inbox.find((request) => request.body.includes('Send contract')),
    'the task after rotation',
  );
  for (const request of [taskAfter, afterRotation]) {
    const signatures = String(request.headers['webhook-signature']).split(' ');
    log(
      `${JSON.parse(request.body).type}: webhook-signature has ${signatures.length} signatures (${signatures.map((s) => short(s)).join(' ')}); verifies(old secret)=${verifies(hook.secret, request)} verifies(new secret)=${verifies(rotated.json.secret, request)}`,
    );
  }

  log('\n# a failing receiver: its answer and the next attempt in the deliveries log');
  answerStatus = 503;
  const ping3 = await call('POST', `/v1/ext/hooks/${hook.hook_id}/test`, api);
  await waitFor(
    () => inbox.find((request) => request.headers['webhook-id'] === ping3.json.event_id),
    'the failing ping',
  );
  await sleep(500);
  const deliveries = await call('GET', `/v1/ext/hooks/${hook.hook_id}/deliveries`, api);
  log(`GET /v1/ext/hooks/${hook.hook_id}/deliveries → ${deliveries.status}, newest first:`);
  for (const attempt of (deliveries.json as unknown as Array<Record<string, unknown>>).slice(0, 3))
    log(`  ${JSON.stringify(attempt)}`);
  answerStatus = 200;

  log('\n# PATCH: the same hook now hears only deals moved into Won (filter.changes), secret and log kept');
  const won = sales.stages[1].stage_id as string;
  const patchBody = {
    events: ['item.updated'],
    filter: { pipeline_id: sales.pipeline_id, changes: { stage: { to: won } } },
  };
  log(`PATCH /v1/ext/hooks/${hook.hook_id} ${JSON.stringify(patchBody)}`);
  const patched = await call('PATCH', `/v1/ext/hooks/${hook.hook_id}`, api, patchBody);
  log(`→ ${patched.status} ${JSON.stringify({ ...patched.json, target_url: '<receiver>' })}`);
  const seen = inbox.length;
  const renamed = await call('PATCH', `/v1/ext/items/${item.item_id}`, api, { name: 'Acme renewal 2027' });
  log(`rename the deal → ${renamed.status} (changes: name)`);
  const moved = await call('PATCH', `/v1/ext/items/${item.item_id}`, api, { stage_id: won });
  log(`move it into Won → ${moved.status} (changes: stage)`);
  await waitFor(() => (inbox.length > seen ? true : undefined), 'the stage move');
  // A third change, which the filter also leaves out, then a ping: once the ping is here, so is anything else.
  await call('PATCH', `/v1/ext/items/${item.item_id}`, api, { name: 'Acme renewal 2027 (signed)' });
  const ping4 = await call('POST', `/v1/ext/hooks/${hook.hook_id}/test`, api);
  await waitFor(() => inbox.find((request) => request.headers['webhook-id'] === ping4.json.event_id), 'a ping');
  await sleep(300);
  const afterPatch = inbox
    .slice(seen)
    .map((request) => JSON.parse(request.body))
    .filter((payload) => payload.type !== 'hook.ping');
  for (const payload of afterPatch) log(`received ${payload.type} changes=${JSON.stringify(payload.changes)}`);
  log(`item.updated received: ${afterPatch.length} (the move; neither rename)`);

  log('\n# an outage: the receiver answers 503 while two more deals move into Won');
  answerStatus = 503;
  const since = new Date().toISOString();
  const outageStart = inbox.length;
  for (const name of ['Globex', 'Initech']) {
    const deal = (
      await call('POST', '/v1/ext/items', api, {
        name,
        pipeline_id: sales.pipeline_id,
        stage_id: sales.stages[0].stage_id,
      })
    ).json;
    await call('PATCH', `/v1/ext/items/${deal.item_id}`, api, { stage_id: won });
  }
  await waitFor(() => (inbox.length >= outageStart + 2 ? true : undefined), 'two failed attempts');
  await sleep(300);
  const failedList = await call('GET', `/v1/ext/hooks/${hook.hook_id}/deliveries?status=pending&since=${since}`, api);
  log(
    `GET .../deliveries?status=pending&since=… → ${failedList.status}: ${(
      failedList.json as unknown as Array<Record<string, unknown>>
    )
      .map(
        (attempt) =>
          `${String(attempt.event_id)} ${String(attempt.response_status)} next ${String(attempt.next_attempt_at)}`,
      )
      .join('; ')}`,
  );

  log('\n# back up: recover everything the hook missed since the outage began');
  answerStatus = 200;
  const recovery = await call('POST', `/v1/ext/hooks/${hook.hook_id}/recover`, api, { since });
  log(
    `POST /v1/ext/hooks/${hook.hook_id}/recover {"since":"${since}"} → ${recovery.status} ${JSON.stringify(recovery.json)}`,
  );
  const busy = await call('POST', `/v1/ext/hooks/${hook.hook_id}/recover`, api, { since });
  log(`again while it runs → ${busy.status} ${String(busy.json.code ?? JSON.stringify(busy.json))}`);
  const failedIds = new Set(inbox.slice(outageStart).map((request) => String(request.headers['webhook-id'])));
  await waitFor(() => {
    const delivered = inbox
      .slice(outageStart + 2)
      .filter((request) => failedIds.has(String(request.headers['webhook-id'])));
    return new Set(delivered.map((request) => request.headers['webhook-id'])).size === failedIds.size
      ? true
      : undefined;
  }, 'the recovered deliveries');
  for (const request of inbox.slice(outageStart + 2)) {
    const payload = JSON.parse(request.body);
    log(
      `received again ${payload.type} sequence=${payload.sequence} webhook-id=${String(request.headers['webhook-id'])}`,
    );
  }
  await sleep(300);
  const succeeded = await call('GET', `/v1/ext/hooks/${hook.hook_id}/deliveries?status=succeeded&since=${since}`, api);
  log(
    `GET .../deliveries?status=succeeded&since=… → ${(succeeded.json as unknown as Array<Record<string, unknown>>).filter((attempt) => attempt.succeeded).length} delivered`,
  );

  const listed = await call('GET', '/v1/ext/hooks', api);
  log(`\nGET /v1/ext/hooks shows a secret: ${JSON.stringify(listed.json).includes('whsec_')}`);
  await call('DELETE', `/v1/ext/hooks/${hook.hook_id}`, api);
  server.close();
}

await main();
