import { createServer } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/redis-server.js';
import { KEPT_RESPONSE_BYTES, WebhookSender, type SendResult } from '../../src/hooks/sender.js';
import { metricsRegistry } from '../../src/shared/metrics.js';
import { TargetGuard } from '../../src/shared/target-guard.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { createTask, createTenant, ext } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from './receiver.js';
import type { AddressInfo } from 'node:net';

const TIMEOUT_MS = 400;
// A well-formed webhook body: the Receiver judges every body it gets against its event type's schema.
const request = {
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({
    event_id: 'evt_6740b7a1c2d3e4f5a6b7c8d9',
    type: 'hook.ping',
    company_id: 'cmp_6740b7a1c2d3e4f5a6b7c8d0',
    occurred_at: '2026-11-20T08:00:00.000Z',
    actor: { type: 'api_key', id: 'key_6740b7a1c2d3e4f5a6b7c8d3' },
    data: { hook_id: 'hk_6740b7a1c2d3e4f5a6b7c8d9' },
  }),
};

/** Everything a tenant could read in an attempt, to check no address or system text is in it. */
function expectNoNetworkDetails(shown: unknown) {
  const text = JSON.stringify(shown);
  expect(text).not.toMatch(
    /\d+\.\d+\.\d+\.\d+|::1|ECONN|EAI_|ENOTFOUND|ESERVFAIL|getaddrinfo|socket|ssl|wrong version/i,
  );
}

describe('the sender reports coarse error categories only', () => {
  const senders: WebhookSender[] = [];
  const receivers: Receiver[] = [];
  afterEach(async () => {
    await Promise.all(senders.splice(0).map((sender) => sender.close()));
    await Promise.all(receivers.splice(0).map((receiver) => receiver.close()));
  });
  function sender(guard = new TargetGuard(true)) {
    const created = new WebhookSender(guard, TIMEOUT_MS);
    senders.push(created);
    return created;
  }
  async function receiver(answer: Receiver['answer']) {
    const started = await Receiver.start(answer);
    receivers.push(started);
    return started;
  }
  const errorOf = (result: SendResult) => (result.kind === 'error' ? result.error : `answered ${result.statusCode}`);

  it('connection_refused, timeout, connection_reset, tls_error', async () => {
    const closedPort = await freePort();
    expect(errorOf(await sender().send({ url: `http://127.0.0.1:${closedPort}/hook`, ...request }))).toBe(
      'connection_refused',
    );
    const hanging = await receiver(() => 'hang');
    const timedOut = await sender().send({ url: hanging.url(), ...request });
    expect(errorOf(timedOut)).toBe('timeout');
    expect(timedOut.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    const resetting = await receiver(() => 'reset');
    expect(errorOf(await sender().send({ url: resetting.url(), ...request }))).toBe('connection_reset');
    // TLS spoken to a plain-HTTP server: the handshake fails.
    const plain = await receiver(() => 200);
    expect(errorOf(await sender().send({ url: `https://127.0.0.1:${plain.port}/hook`, ...request }))).toBe('tls_error');
  });

  it('ends a request at the timeout even when the receiver keeps its answer trickling in', async () => {
    // The status at once, then a body chunk every TIMEOUT_MS / 4 for 5 × TIMEOUT_MS: undici's own
    // timeouts (headers, and the body's idle time) never fire, so only the request's deadline ends it.
    const dripping = createServer((_, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const drip = setInterval(() => res.write('.'), TIMEOUT_MS / 4);
      const stop = setTimeout(() => res.end(), 5 * TIMEOUT_MS);
      res.on('close', () => {
        clearInterval(drip);
        clearTimeout(stop);
      });
    });
    await new Promise<void>((resolve) => dripping.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = dripping.address() as AddressInfo;
      const result = await sender().send({ url: `http://127.0.0.1:${port}/hook`, ...request });
      // An answer cut short after its status still counts as that answer (sender.ts).
      expect(errorOf(result)).toBe('answered 200');
      expect(result.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
      expect(result.durationMs).toBeLessThan(2 * TIMEOUT_MS);
    } finally {
      dripping.closeAllConnections();
      await new Promise((resolve) => dripping.close(resolve));
    }
  });

  it('dns_failure and refused_target, whatever the resolver said', async () => {
    const failingDns = new TargetGuard(false, async (hostname) => {
      throw Object.assign(new Error(`queryA ESERVFAIL ${hostname} via 10.0.0.53`), { code: 'ESERVFAIL' });
    });
    expect(errorOf(await sender(failingDns).send({ url: 'https://hooks.example.com/x', ...request }))).toBe(
      'dns_failure',
    );
    const emptyDns = new TargetGuard(false, async () => []);
    expect(errorOf(await sender(emptyDns).send({ url: 'https://hooks.example.com/x', ...request }))).toBe(
      'dns_failure',
    );
    const insideDns = new TargetGuard(false, async () => ['10.1.2.3']);
    expect(errorOf(await sender(insideDns).send({ url: 'https://hooks.example.com/x', ...request }))).toBe(
      'refused_target',
    );
  });

  it('keeps at most the first 1 KiB of the answer as text, never half a character', async () => {
    const long = 'é'.repeat(3_000); // 2 bytes each: 1 KiB ends exactly between two
    const odd = `x${long}`; // ... and here in the middle of one
    const answers = [long, odd, ''];
    const answering = await receiver((_, index) => ({ status: 200, body: answers[index] }));
    const results = [];
    for (let i = 0; i < answers.length; i++) results.push(await sender().send({ url: answering.url(), ...request }));
    const bodies = results.map((result) => (result.kind === 'response' ? result.body : undefined));
    expect(bodies[0]).toBe('é'.repeat(KEPT_RESPONSE_BYTES / 2));
    expect(bodies[1]).toBe(`x${'é'.repeat(KEPT_RESPONSE_BYTES / 2 - 1)}`);
    expect(Buffer.byteLength(bodies[1]!)).toBe(KEPT_RESPONSE_BYTES - 1);
    expect(bodies[2]).toBe('');
  });

  it('stops reading an answer past 64 KiB and still reports it, with its first 1 KiB', async () => {
    const huge = `${'a'.repeat(KEPT_RESPONSE_BYTES)}${'b'.repeat(512 * 1024)}`;
    const answering = await receiver((_, index) => (index === 0 ? { status: 202, body: huge } : { status: 200 }));
    const sending = sender();
    const result = await sending.send({ url: answering.url(), ...request });
    expect(result).toMatchObject({ kind: 'response', statusCode: 202, body: 'a'.repeat(KEPT_RESPONSE_BYTES) });
    // The half-read connection is closed, not reused: the next request goes out on a fresh one.
    expect(await sending.send({ url: answering.url(), ...request })).toMatchObject({
      kind: 'response',
      statusCode: 200,
    });
  });
});

describe('the deliveries log', () => {
  let t: TestApp;
  let workers: { close(): Promise<void> };
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    t = await buildTestApp(
      {
        RATE_LIMIT_MAX: '100000',
        HOOK_BACKOFF_MS: '150',
        HOOK_MAX_ATTEMPTS: '3',
        HOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      },
      { publisher: true },
    );
    workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks']);
  });
  afterAll(async () => {
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await workers?.close();
    await t?.close();
  });

  async function attempts(tenant: { key: string }, hookId: string, count: number) {
    return waitFor(async () => {
      const listed = (await ext(t.app, tenant.key, 'GET', `/hooks/${hookId}/deliveries`)).json();
      return listed.length === count ? listed : undefined;
    });
  }

  it("shows the receiver's status, the start of its answer, the duration, the error category and the next attempt", async () => {
    const tenant = await createTenant(t.app);
    const unavailable = `{"error":"down for maintenance"}${' '.repeat(2_000)}tail`;
    const inbox = await Receiver.start((_, index) =>
      index === 0 ? { status: 503, body: unavailable } : index === 1 ? 'hang' : { status: 200, body: 'ok' },
    );
    receivers.push(inbox);
    const hook = (
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.created' })
    ).json();
    await createTask(t.app, tenant);
    const [third, second, first] = await attempts(tenant, hook.hook_id, 3);

    expect(first).toMatchObject({
      attempt: 1,
      succeeded: false,
      response_status: 503,
      error: 'http_status',
      response_body: unavailable.slice(0, KEPT_RESPONSE_BYTES),
    });
    expect(first.response_body).toHaveLength(KEPT_RESPONSE_BYTES);
    expect(first.duration_ms).toEqual(expect.any(Number));
    expect(Date.parse(first.next_attempt_at)).toBeGreaterThan(Date.parse(first.attempted_at));
    expect(first.next_retry_at).toBe(first.next_attempt_at); // the older name, kept for existing clients
    expect(first.status_code).toBe(503);

    expect(second).toMatchObject({
      attempt: 2,
      succeeded: false,
      response_status: null,
      response_body: null,
      error: 'timeout',
    });
    expect(second.duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(second.next_attempt_at).toEqual(expect.any(String));

    expect(third).toMatchObject({
      attempt: 3,
      succeeded: true,
      response_status: 200,
      response_body: 'ok',
      error: null,
      next_attempt_at: null,
    });
    expectNoNetworkDetails([first, second, third]);

    // The worker's metrics count the same attempts by outcome and category.
    const metrics = await metricsRegistry.getSingleMetricAsString('webhook_deliveries_total');
    expect(metrics).toMatch(/webhook_deliveries_total\{outcome="failure",error="http_status"\} [1-9]/);
    expect(metrics).toMatch(/webhook_deliveries_total\{outcome="failure",error="timeout"\} [1-9]/);
    expect(metrics).toMatch(/webhook_deliveries_total\{outcome="success",error="none"\} [1-9]/);
  });

  it('maps attempts recorded with free-text errors before categories existed, never showing the text', async () => {
    const tenant = await createTenant(t.app);
    const hook = (
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: 'http://127.0.0.1:9/x', event: 'item.created' })
    ).json();
    const legacy = [
      'connection failed: ECONNREFUSED (connect ECONNREFUSED 10.0.0.5:443)',
      'refused: evil.test resolves to 169.254.169.254, a private, loopback or otherwise internal address',
      'timeout: no answer within 10000 ms',
      'connection failed: ENOTFOUND (getaddrinfo ENOTFOUND x.test)',
      'connection failed: UND_ERR_SOCKET (other side closed 10.0.0.7:443)',
    ];
    await t.db.collection('deliveries').insertMany(
      legacy.map((error, i) => ({
        _id: `${hook.hook_id}:evt_legacy${i}` as never,
        company_id: tenant.companyId,
        hook_id: hook.hook_id,
        automation_id: null,
        event_id: `evt_legacy${i}`,
        event_type: 'item.created',
        event: {},
        attempts: [
          {
            attempt: 1,
            status_code: null,
            error,
            duration_ms: 3,
            succeeded: false,
            next_retry_at: null,
            attempted_at: new Date(Date.now() - i * 1_000),
          },
        ],
        created_at: new Date(),
        updated_at: new Date(Date.now() - i * 1_000),
      })),
    );
    const listed = (await ext(t.app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json();
    expect(listed.map((attempt: { error: string }) => attempt.error)).toEqual([
      'connection_refused',
      'refused_target',
      'timeout',
      'dns_failure',
      'connection_reset',
    ]);
    expectNoNetworkDetails(listed);
  });
});
