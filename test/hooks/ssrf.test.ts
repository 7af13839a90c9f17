import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { createEventPublisher } from '../../src/container.js';
import { ensureIndexes } from '../../src/repositories.js';
import { isForbiddenAddress } from '../../src/shared/target-guard.js';
import { startWorkers } from '../../workers/start.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createTask, createTenant, expectProblem, ext } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from './receiver.js';
import type { QueueEventPublisher } from '../../src/events/queue-publisher.js';

// DNS the test controls: the same resolver serves the web app (subscribe time) and the worker (delivery time).
const dns = new Map<string, string[]>([
  ['internal.test', ['10.0.0.5']],
  ['localhost', ['127.0.0.1', '::1']],
  ['public.test', ['93.184.216.34']],
  ['compat.test', ['::a9fe:a9fe']],
  ['nat64.test', ['64:ff9b::a00:5']],
  ['sixtofour.test', ['2002:7f00:1::1']],
]);
const resolver = async (hostname: string) => dns.get(hostname) ?? [];

let env: TestEnv;
let app: App;
let publisher: QueueEventPublisher;
let workers: { close(): Promise<void> };
beforeAll(async () => {
  env = await createTestEnv({
    RATE_LIMIT_MAX: '100000',
    HOOK_ALLOW_PRIVATE_TARGETS: 'false',
    HOOK_BACKOFF_MS: '100',
    HOOK_MAX_ATTEMPTS: '2',
  });
  await ensureIndexes(env.db);
  const logger = pino({ level: 'silent' });
  publisher = createEventPublisher(env.db, { connection: env.redis, prefix: env.config.QUEUE_PREFIX }, logger);
  app = await buildApp({ config: env.config, db: env.db, redis: env.redis, publisher, resolver, logger });
  workers = await startWorkers({
    config: { ...env.config, WORKERS: ['relay', 'hooks'] },
    db: env.db,
    logger,
    resolver,
  });
});
afterAll(async () => {
  await workers?.close();
  await app?.close();
  await publisher?.close();
  await env?.close();
});

const FORBIDDEN_TARGETS = [
  'http://127.0.0.1/',
  'http://localhost:8080/',
  'http://10.1.2.3/',
  'http://172.16.0.1/',
  'http://172.31.255.254/',
  'http://192.168.1.1/',
  'http://169.254.169.254/latest/meta-data/',
  'http://169.254.1.1/',
  'http://0.0.0.0/',
  'http://[::1]/',
  'http://[::]/',
  'http://[fc00::1]/',
  'http://[fd12:3456::1]/',
  'http://[fe80::1]/',
  'http://100.64.0.1/',
  'http://224.0.0.1/',
  // other spellings of 127.0.0.1
  'http://2130706433/',
  'http://0177.0.0.1/',
  'http://0x7f.1/',
  'http://[::ffff:127.0.0.1]/',
  'https://127.1:8443/',
  // IPv4-compatible IPv6 (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) forms of refused IPv4 addresses
  'http://[::7f00:1]/',
  'http://[::127.0.0.1]/',
  'http://[::a9fe:a9fe]/latest/meta-data/',
  'http://[::a00:1]/',
  'http://[64:ff9b::7f00:1]/',
  'http://[64:ff9b::a9fe:a9fe]/',
  'http://[64:ff9b::c0a8:101]/',
  'http://[2002:7f00:1::]/',
  'http://[2002:a9fe:a9fe::1]/',
  'http://[2002:a00:1:1::1]/',
  // names that resolve to such forms
  'http://compat.test/',
  'http://nat64.test/',
  'http://sixtofour.test/',
  // a name that resolves inside
  'http://internal.test/hook',
  // names internal by definition, refused even though they do not resolve here
  'http://metadata.google.internal/computeMetadata/v1/',
  'http://api.localhost/',
  'http://printer.local/',
  'http://intranet/',
];

describe('SSRF guard', () => {
  it('judges the IPv4 address inside IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 forms', () => {
    for (const inside of ['127.0.0.1', '10.0.0.1', '169.254.169.254', '192.168.1.1', '100.64.0.1', '0.0.0.0']) {
      const [a, b, c, d] = inside.split('.').map(Number) as [number, number, number, number];
      const high = ((a << 8) | b).toString(16);
      const low = ((c << 8) | d).toString(16);
      for (const form of [
        `::ffff:${inside}`,
        `::${inside}`,
        `::${high}:${low}`,
        `64:ff9b::${high}:${low}`,
        `2002:${high}:${low}::1`,
      ])
        expect(isForbiddenAddress(form), form).toBe(true);
    }
    // The same forms of a public address reach that public host (NAT64 is how IPv6-only networks reach IPv4).
    for (const form of ['::ffff:93.184.216.34', '64:ff9b::5db8:d822', '2002:5db8:d822::1'])
      expect(isForbiddenAddress(form), form).toBe(false);
    // Still judged as themselves: ::, ::1, Teredo and the local-use NAT64 prefix.
    for (const form of ['::', '::1', '2001::1', '64:ff9b:1::5db8:d822'])
      expect(isForbiddenAddress(form), form).toBe(true);
  });

  it.each(FORBIDDEN_TARGETS)('refuses %s at subscribe time', async (target_url) => {
    const tenant = await createTenant(app);
    const body = expectProblem(
      await ext(app, tenant.key, 'POST', '/hooks', { target_url, event: '*' }),
      400,
      'validation_failed',
    );
    expect(body.errors).toEqual([
      { path: 'target_url', message: 'resolves to a private, loopback or otherwise internal address' },
    ]);
  });

  it('reports a forbidden target alongside a schema problem of the same body', async () => {
    const tenant = await createTenant(app);
    const body = expectProblem(
      await ext(app, tenant.key, 'POST', '/hooks', { target_url: 'http://10.1.2.3/', event: 'no.such.event' }),
      400,
      'validation_failed',
    );
    expect(body.errors.map((error: { path: string }) => error.path).sort()).toEqual(['event', 'target_url']);
  });

  it('accepts a name that resolves to a public address', async () => {
    const tenant = await createTenant(app);
    expect(
      (await ext(app, tenant.key, 'POST', '/hooks', { target_url: 'https://public.test/hook', event: '*' })).statusCode,
    ).toBe(201);
  });

  it('accepts a name that does not resolve yet (deliveries check the address they connect to)', async () => {
    const tenant = await createTenant(app);
    expect(
      (await ext(app, tenant.key, 'POST', '/hooks', { target_url: 'https://not-yet-in-dns.test/hook', event: '*' }))
        .statusCode,
    ).toBe(201);
  });

  it('refuses at delivery time when DNS changed to 127.0.0.1 since subscribing (rebinding)', async () => {
    const inbox = await Receiver.start();
    try {
      const tenant = await createTenant(app);
      dns.set('rebind.test', ['93.184.216.34']);
      const hook = (
        await ext(app, tenant.key, 'POST', '/hooks', {
          target_url: `http://rebind.test:${inbox.port}/hook`,
          event: 'task.created',
        })
      ).json();
      expect(hook.hook_id).toEqual(expect.any(String));

      dns.set('rebind.test', ['127.0.0.1']);
      await createTask(app, tenant);
      const attempts = await waitFor(async () => {
        const listed = (await ext(app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json();
        return listed.length === 2 ? listed : undefined; // HOOK_MAX_ATTEMPTS=2
      });
      for (const attempt of attempts) {
        expect(attempt).toMatchObject({
          status_code: null,
          succeeded: false,
          error: 'refused_target', // never the address it resolved to
        });
        expect(JSON.stringify(attempt)).not.toMatch(/127\.0\.0\.1|rebind/);
      }
      dns.set('rebind.test', ['93.184.216.34', '::ffff:7f00:1']); // one inside address among public ones is enough to refuse
      await createTask(app, tenant);
      await waitFor(
        async () => (await ext(app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json().length === 4,
      );
      // IPv4-compatible, NAT64 and 6to4 forms of loopback are refused at connect time too.
      let expected = 4;
      for (const form of ['::7f00:1', '64:ff9b::7f00:1', '2002:7f00:1::1']) {
        dns.set('rebind.test', [form]);
        await createTask(app, tenant);
        expected += 2;
        const listed = await waitFor(async () => {
          const all = (await ext(app, tenant.key, 'GET', `/hooks/${hook.hook_id}/deliveries`)).json();
          return all.length === expected ? all : undefined;
        });
        expect(listed[0].status_code).toBeNull();
        expect(listed[0].succeeded).toBe(false);
        expect(listed[0].error).not.toBeNull();
      }
      // Every attempt is recorded (waited for above) after its connection was refused or made: none reached the inbox.
      expect(inbox.requests).toHaveLength(0);
    } finally {
      await inbox.close();
    }
  });
});
