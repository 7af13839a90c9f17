import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/shared/config.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { EXT_ROUTES, seedResources } from '../helpers/ext-routes.js';
import { admin, createKey, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

let t: TestApp;
let tenant: Tenant;
const ALL_SCOPES = ['items:read', 'items:write', 'tasks:read', 'tasks:write', 'hooks:manage'];

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000' });
  tenant = await createTenant(t.app);
  await seedResources(t.app, tenant);
});
afterAll(async () => t?.close());

describe.each(EXT_ROUTES)('$method $scope route', (route) => {
  const call = (key: string | undefined) => ext(t.app, key, route.method, route.url(tenant), route.body?.(tenant));
  // Each route's refusals start a fresh failed-auth window: the matrix's guesses add up past its limit
  // (20 a minute per address), which the throttle's own tests below judge.
  beforeEach(async () => {
    const counted = await t.redis.keys(`*${t.config.QUEUE_PREFIX}*authfail*`);
    if (counted.length > 0) await t.redis.del(...counted);
  });

  it('refuses a missing key with 401', async () => {
    expectProblem(await call(undefined), 401, 'unauthorized');
  });

  it('refuses an unknown and a malformed key with 401', async () => {
    expectProblem(await call(`prk_${'A'.repeat(43)}`), 401, 'unauthorized');
    expectProblem(await call('not-a-key'), 401, 'unauthorized');
  });

  it('refuses a revoked key with 401', async () => {
    const key = await createKey(t.app, tenant.companyId, tenant.userId);
    await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/api-keys/${key.key_id}`, undefined, 204);
    expectProblem(await call(key.key), 401, 'unauthorized');
  });

  it('refuses an expired key with 401', async () => {
    const key = await createKey(t.app, tenant.companyId, tenant.userId, undefined, {
      expires_at: new Date(Date.now() - 1000).toISOString(),
    });
    expectProblem(await call(key.key), 401, 'unauthorized');
  });

  it('answers 402 for a company with an inactive subscription', async () => {
    const inactive = await createTenant(t.app, { subscription_status: 'inactive' });
    expectProblem(await call(inactive.key), 402, 'subscription_inactive');
  });

  it(`answers 403 with required_scope for a key without ${route.scope}`, async () => {
    const key = await createKey(
      t.app,
      tenant.companyId,
      tenant.userId,
      ALL_SCOPES.filter((scope) => scope !== route.scope),
    );
    const body = expectProblem(await call(key.key), 403, 'insufficient_scope');
    expect(body.required_scope).toBe(route.scope);
  });

  it(`lets a key with only ${route.scope} (and what its body needs) through`, async () => {
    const key = await createKey(t.app, tenant.companyId, tenant.userId, [route.scope, ...(route.bodyScopes ?? [])]);
    const response = await call(key.key);
    expect([401, 402, 403]).not.toContain(response.statusCode);
    expect(response.statusCode).toBeLessThan(500);
  });
});

describe('unknown paths under /v1/ext/', () => {
  it('are checked like any request: 401 without a key, 404 with rate-limit headers with one', async () => {
    expectProblem(await ext(t.app, undefined, 'GET', '/no-such-thing'), 401, 'unauthorized');
    const response = await ext(t.app, tenant.key, 'GET', '/no-such-thing');
    expectProblem(response, 404, 'not_found');
    expect(response.headers['ratelimit-remaining']).toBeDefined();
  });

  it('take one rate-limit slot, like any other request', async () => {
    const key = await createKey(t.app, tenant.companyId, tenant.userId);
    const first = Number((await ext(t.app, key.key, 'GET', '/no-such-thing')).headers['ratelimit-remaining']);
    const second = Number((await ext(t.app, key.key, 'GET', '/no-such-thing')).headers['ratelimit-remaining']);
    expect(first - second).toBe(1);
  });
});

describe('API keys', () => {
  it('are never stored in plain text', async () => {
    const key = await createKey(t.app, tenant.companyId, tenant.userId);
    const stored = await t.db.collection('api_keys').find({}).toArray();
    expect(stored.length).toBeGreaterThan(0);
    const dump = JSON.stringify(stored);
    expect(dump).not.toContain(key.key);
    expect(dump).not.toContain(key.key.slice(12));
    const listed = (await admin(t.app, 'GET', `/companies/${tenant.companyId}/api-keys`, undefined, 200)).body;
    expect(listed).not.toContain(key.key);
  });

  it('keep working after a rename', async () => {
    const key = await createKey(t.app, tenant.companyId, tenant.userId);
    const renamed = await admin(
      t.app,
      'PATCH',
      `/companies/${tenant.companyId}/api-keys/${key.key_id}`,
      { name: 'renamed' },
      200,
    );
    expect(renamed.json().name).toBe('renamed');
    expect((await ext(t.app, key.key, 'GET', '/pipelines')).statusCode).toBe(200);
  });

  it('record last_used_at without a write per request, and the key list shows it at once', async () => {
    const key = await createKey(t.app, tenant.companyId, tenant.userId);
    for (let i = 0; i < 5; i++) expect((await ext(t.app, key.key, 'GET', '/pipelines')).statusCode).toBe(200);
    const before = await t.db.collection('api_keys').findOne({ _id: key.key_id as never });
    expect(before?.last_used_at).toBeNull();
    // The admin list shows this process's uses at once, without waiting for the periodic write.
    const listed = (await admin(t.app, 'GET', `/companies/${tenant.companyId}/api-keys`, undefined, 200)).json();
    const entry = listed.find((candidate: { key_id: string }) => candidate.key_id === key.key_id);
    expect(Date.parse(entry.last_used_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(entry.revoked_at).toBeNull();
  });

  it('a revoked key is refused by another web process within 5 s', async () => {
    const other = await buildApp({ config: t.config, db: t.db, redis: t.redis });
    try {
      const key = await createKey(t.app, tenant.companyId, tenant.userId);
      expect((await ext(other, key.key, 'GET', '/pipelines')).statusCode).toBe(200); // now cached in `other`
      await admin(t.app, 'DELETE', `/companies/${tenant.companyId}/api-keys/${key.key_id}`, undefined, 204);
      const revokedAt = Date.now();
      let status = 200;
      while (status === 200 && Date.now() - revokedAt < 6_000) {
        status = (await ext(other, key.key, 'GET', '/pipelines')).statusCode;
        if (status === 200) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(status).toBe(401);
      expect(Date.now() - revokedAt).toBeLessThan(5_000);
    } finally {
      await other.close();
    }
  });

  it('another web process refuses a revoked key, and a company made inactive, within a second (change feed)', async () => {
    const other = await buildApp({ config: t.config, db: t.db, redis: t.redis });
    try {
      const own = await createTenant(t.app);
      const key = await createKey(t.app, own.companyId, own.userId);
      await waitFor(() => other.services.changes.access.live); // it subscribes as it starts
      // Both keys cached as valid in `other`.
      expect((await ext(other, key.key, 'GET', '/pipelines')).statusCode).toBe(200);
      expect((await ext(other, own.key, 'GET', '/pipelines')).statusCode).toBe(200);
      await admin(t.app, 'DELETE', `/companies/${own.companyId}/api-keys/${key.key_id}`, undefined, 204);
      const revokedAt = Date.now();
      await waitFor(async () => (await ext(other, key.key, 'GET', '/pipelines')).statusCode === 401, 5_000, 10);
      expect(Date.now() - revokedAt).toBeLessThan(1_000);

      await admin(t.app, 'PATCH', `/companies/${own.companyId}`, { subscription_status: 'inactive' }, 200);
      const changedAt = Date.now();
      await waitFor(async () => (await ext(other, own.key, 'GET', '/pipelines')).statusCode === 402, 5_000, 10);
      expect(Date.now() - changedAt).toBeLessThan(1_000);
    } finally {
      await other.close();
    }
  });

  it('an inactive subscription is seen at once by the process that changed it', async () => {
    const own = await createTenant(t.app);
    expect((await ext(t.app, own.key, 'GET', '/pipelines')).statusCode).toBe(200);
    await admin(t.app, 'PATCH', `/companies/${own.companyId}`, { subscription_status: 'inactive' }, 200);
    expectProblem(await ext(t.app, own.key, 'GET', '/pipelines'), 402, 'subscription_inactive');
  });
});

describe('failed authentication throttling', () => {
  /** An app of its own (its own throttle window) on the shared database and Redis. */
  const throttleApp = (suffix: string, overrides: Partial<typeof t.config> = {}, db = t.db) =>
    buildApp({
      config: { ...t.config, QUEUE_PREFIX: `${t.config.QUEUE_PREFIX}-${suffix}`, ...overrides },
      db,
      redis: t.redis,
    });
  const guess = (i: number) => (i % 2 === 0 ? `prk_${String(i).padStart(43, 'x')}` : `prk_wrong${i}`);

  it('answers 429 to an address that keeps guessing keys (any prk_ value), to every request, while missing and junk keys do not count', async () => {
    const app = await throttleApp('guess');
    try {
      for (let i = 0; i < 30; i++) expect((await ext(app, undefined, 'GET', '/pipelines')).statusCode).toBe(401);
      for (let i = 0; i < 30; i++) expect((await ext(app, `malformed-${i}`, 'GET', '/pipelines')).statusCode).toBe(401);
      const statuses: number[] = [];
      // Well-formed guesses and short ones claiming the prefix both count.
      for (let i = 0; i < 25; i++) statuses.push((await ext(app, guess(i), 'GET', '/pipelines')).statusCode);
      expect(statuses.slice(0, 20).every((status) => status === 401)).toBe(true);
      expect(statuses.slice(20).every((status) => status === 429)).toBe(true);
      const blocked = await ext(app, `prk_${'y'.repeat(43)}`, 'GET', '/pipelines');
      expectProblem(blocked, 429, 'rate_limited');
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      // Over the limit, a correct key does not tell the guesser it was right (DECISIONS.md section 12.4).
      expectProblem(await ext(app, tenant.key, 'GET', '/pipelines'), 429, 'rate_limited');
      expectProblem(await ext(app, undefined, 'GET', '/pipelines'), 429, 'rate_limited');
      // Another address is not affected.
      const elsewhere = await app.inject({
        method: 'GET',
        url: '/v1/ext/pipelines',
        headers: { 'x-api-key': tenant.key },
        remoteAddress: '198.51.100.20',
      });
      expect(elsewhere.statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('a blocked address costs no database lookup, even with a correct key', async () => {
    const client = new MongoClient(t.config.MONGO_URL!, { monitorCommands: true });
    let keyLookups = 0;
    client.on('commandStarted', (event) => {
      if (event.commandName === 'find' && event.command.find === 'api_keys') keyLookups++;
    });
    const app = await throttleApp('lookups', {}, client.db(t.config.MONGO_DB));
    try {
      for (let i = 0; i < 21; i++) await ext(app, `prk_${String(i).padStart(43, 'q')}`, 'GET', '/pipelines');
      expect(keyLookups).toBe(21);
      for (let i = 0; i < 10; i++) {
        expectProblem(await ext(app, `prk_${String(i).padStart(43, 'r')}`, 'GET', '/pipelines'), 429, 'rate_limited');
      }
      expectProblem(await ext(app, tenant.key, 'GET', '/pipelines'), 429, 'rate_limited');
      expect(keyLookups).toBe(21);
    } finally {
      await app.close();
      await client.close();
    }
  });

  it('another web process refuses a blocked address too, told over the change feed', async () => {
    const first = await throttleApp('processes');
    const second = await throttleApp('processes');
    try {
      expect(await waitFor(() => first.services.changes.access.live && second.services.changes.access.live)).toBe(true);
      expect((await ext(second, tenant.key, 'GET', '/pipelines')).statusCode).toBe(200);
      for (let i = 0; i < 21; i++) await ext(first, guess(i), 'GET', '/pipelines');
      expectProblem(await ext(first, tenant.key, 'GET', '/pipelines'), 429, 'rate_limited');
      const refused = await waitFor(
        async () => (await ext(second, tenant.key, 'GET', '/pipelines')).statusCode === 429,
        5_000,
      );
      expect(refused).toBe(true);
    } finally {
      await first.close();
      await second.close();
    }
  });

  describe('behind proxies (TRUST_PROXY)', () => {
    /** A request through the proxies: the socket peer is the nearest proxy, X-Forwarded-For as it arrives. */
    const viaProxy = (app: Awaited<ReturnType<typeof throttleApp>>, key: string, forwardedFor: string) =>
      app.inject({
        method: 'GET',
        url: '/v1/ext/pipelines',
        headers: { 'x-api-key': key, 'x-forwarded-for': forwardedFor },
        remoteAddress: '10.0.0.2',
      });

    it.each([
      ['1 hop', { TRUST_PROXY: 1 }, (client: string, spoofed: string) => `${spoofed}, ${client}`],
      [
        'true (kept as 1 hop)',
        { TRUST_PROXY: loadConfig({ TRUST_PROXY: 'true' }).TRUST_PROXY },
        (client: string, spoofed: string) => `${spoofed}, ${client}`,
      ],
      ['2 hops', { TRUST_PROXY: 2 }, (client: string, spoofed: string) => `${spoofed}, ${client}, 10.0.0.1`],
      [
        'the proxies by address',
        { TRUST_PROXY: ['10.0.0.0/8'] },
        (client: string, spoofed: string) => `${spoofed}, ${client}, 10.0.0.1`,
      ],
    ] as const)(
      '%s: a rotating leftmost X-Forwarded-For does not bypass the throttle',
      async (name, overrides, chain) => {
        const app = await throttleApp(`proxy-${name.replace(/\W/g, '')}`, overrides as never);
        try {
          const client = '203.0.113.7';
          for (let i = 0; i < 25; i++) await viaProxy(app, guess(i), chain(client, `192.0.2.${i}`));
          const blocked = await viaProxy(app, tenant.key, chain(client, '192.0.2.200'));
          expectProblem(blocked, 429, 'rate_limited');
          // Another client behind the same proxies is not blocked.
          expect((await viaProxy(app, tenant.key, chain('203.0.113.8', '203.0.113.7'))).statusCode).toBe(200);
        } finally {
          await app.close();
        }
      },
    );

    it('TRUST_PROXY is read as hops, true (1 hop), false, or a list of proxy addresses', () => {
      const parse = (value: string) => loadConfig({ TRUST_PROXY: value }).TRUST_PROXY;
      expect(parse('false')).toBe(false);
      expect(parse('0')).toBe(false);
      expect(parse('true')).toBe(1);
      expect(parse('2')).toBe(2);
      expect(parse('10.0.0.0/8, 192.168.1.10,::1')).toEqual(['10.0.0.0/8', '192.168.1.10', '::1']);
      expect(() => parse('yes')).toThrow(/^Invalid configuration: TRUST_PROXY: expected a number of proxy hops/);
    });
  });
});
