import { MongoClient, type CommandStartedEvent } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { must } from '../../src/shared/must.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createKey, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';
import { sleep } from '../helpers/wait.js';

/** OWASP API2 (authentication) and API4 (rate limit) across several web processes sharing MongoDB and Redis. */

/** Two more web processes beside `t.app`, each with its own Redis connection, as separate processes would have. */
async function moreWebProcesses(t: TestApp, count: number): Promise<{ apps: App[]; close(): Promise<void> }> {
  const redises = Array.from({ length: count }, () => createRequestPathRedis(t.config.REDIS_URL));
  redises.forEach((redis) => redis.on('error', () => {}));
  const apps = await Promise.all(redises.map((redis) => buildApp({ config: t.config, db: t.db, redis })));
  return {
    apps,
    async close() {
      await Promise.all(apps.map((app) => app.close()));
      redises.forEach((redis) => redis.disconnect());
    },
  };
}

/**
 * True when some 6 admissions must have happened within less than `windowMs`: each admission lies
 * between its request's send and receive time, so a 6-set whose latest receive minus earliest send is
 * shorter than the window proves a window held 6 (more than the limit of 5).
 */
function provenOverAdmission(
  admissions: Array<{ sent: number; received: number }>,
  limit: number,
  windowMs: number,
  toleranceMs: number,
) {
  const bySent = [...admissions].sort((a, b) => a.sent - b.sent);
  for (const [index, first] of bySent.entries()) {
    const others = bySent
      .slice(index + 1)
      .map((admission) => admission.received)
      .sort((a, b) => a - b);
    const last = others[limit - 1];
    if (last === undefined) break;
    const latest = Math.max(first.received, last);
    if (latest - first.sent < windowMs - toleranceMs) return { from: first.sent, to: latest };
  }
  return undefined;
}

describe('API4 rate limit across 3 web processes (5 per 2 s)', () => {
  let t: TestApp;
  let others: Awaited<ReturnType<typeof moreWebProcesses>>;
  beforeAll(async () => {
    t = await buildTestApp({ RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '2' });
    others = await moreWebProcesses(t, 2);
  });
  afterAll(async () => {
    await others?.close();
    await t?.close();
  });

  it('never admits more than 5 in any 2 s window while three processes fire bursts across window boundaries', async () => {
    const tenant = await createTenant(t.app);
    const apps = [t.app, ...others.apps];
    const admissions: Array<{ sent: number; received: number }> = [];
    const statuses: number[] = [];
    const fire = async (app: App) => {
      const sent = Date.now();
      const response = await ext(app, tenant.key, 'GET', '/pipelines');
      statuses.push(response.statusCode);
      if (response.statusCode === 200) admissions.push({ sent, received: Date.now() });
    };
    // Warm every process up (connections, the Lua script, a key lookup) so the first burst is admitted at once.
    const warmUp = await createKey(t.app, tenant.companyId, tenant.userId);
    await Promise.all(apps.map((app) => ext(app, warmUp.key, 'GET', '/pipelines')));
    const start = Date.now();
    await Promise.all(apps.flatMap((app) => [fire(app), fire(app), fire(app)]));
    const firstBurstDone = Date.now();
    expect(admissions).toHaveLength(5);
    // A trickle from every process, and bursts of 9 while the first admissions leave the window (2 s and 4 s later).
    while (Date.now() - start < 5_000) {
      const now = Date.now();
      const nearBoundary = [2_000, 4_000].some(
        (shift) => now >= start + shift - 30 && now <= firstBurstDone + shift + 30,
      );
      await Promise.all(apps.flatMap((app) => Array.from({ length: nearBoundary ? 3 : 1 }, () => fire(app))));
      await sleep(15);
    }
    expect(new Set(statuses)).toEqual(new Set([200, 429]));
    expect(provenOverAdmission(admissions, 5, 2_000, 5)).toBeUndefined();
    // The window keeps admitting as old requests leave it: about 5 per 2 s over 5 s, never more than 15.
    expect(admissions.length).toBeGreaterThanOrEqual(10);
    expect(admissions.length).toBeLessThanOrEqual(15);
  });

  it('the window check itself spots 6 admissions inside 2 s', () => {
    const six = Array.from({ length: 6 }, (_, index) => ({ sent: index * 300, received: index * 300 + 2 }));
    expect(provenOverAdmission(six, 5, 2_000, 5)).toEqual({ from: 0, to: 1_502 });
    expect(
      provenOverAdmission(
        six.map((entry, index) => (index === 5 ? { sent: 2_000, received: 2_001 } : entry)),
        5,
        2_000,
        5,
      ),
    ).toBeUndefined();
  });
});

describe('API2 API keys', () => {
  let t: TestApp;
  let tenant: Tenant;
  beforeAll(async () => {
    t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
    tenant = await createTenant(t.app);
  });
  afterAll(async () => t?.close());

  it('rejects a malformed key without a database lookup, while a well-formed unknown key costs one', async () => {
    const client = new MongoClient(t.config.MONGO_URL!, { monitorCommands: true });
    const keyLookups: CommandStartedEvent[] = [];
    client.on('commandStarted', (event) => {
      if (event.commandName === 'find' && event.command.find === 'api_keys') keyLookups.push(event);
    });
    const app = await buildApp({ config: t.config, db: client.db(t.config.MONGO_DB), redis: t.redis });
    try {
      const malformed = [
        '',
        'not-a-key',
        'prk_short',
        `prk_${'!'.repeat(43)}`,
        `prk_${'a'.repeat(129)}`,
        `PRK_${'a'.repeat(43)}`,
        'x'.repeat(8_000),
      ];
      for (const key of malformed) expectProblem(await ext(app, key, 'GET', '/items'), 401, 'unauthorized');
      expect(keyLookups).toHaveLength(0);
      expectProblem(await ext(app, `prk_${'A'.repeat(43)}`, 'GET', '/items'), 401, 'unauthorized');
      expect(keyLookups).toHaveLength(1);
      expect((await ext(app, tenant.key, 'GET', '/items')).statusCode).toBe(200);
      expect(keyLookups).toHaveLength(2);
    } finally {
      await app.close();
      await client.close();
    }
  });

  it('a revoked key is refused by every one of 3 web processes within 5 s', async () => {
    const others = await moreWebProcesses(t, 2);
    try {
      const apps = [t.app, ...others.apps];
      const key = await createKey(t.app, tenant.companyId, tenant.userId);
      // Every process has the key cached as valid before the revocation.
      for (const app of apps) expect((await ext(app, key.key, 'GET', '/pipelines')).statusCode).toBe(200);
      const revokedAt = Date.now();
      await admin(
        must(others.apps[1], 'the third web process'),
        'DELETE',
        `/companies/${tenant.companyId}/api-keys/${key.key_id}`,
        undefined,
        204,
      );
      const refusedAfter = await Promise.all(
        apps.map(async (app) => {
          while (Date.now() - revokedAt < 6_000) {
            if ((await ext(app, key.key, 'GET', '/pipelines')).statusCode === 401) return Date.now() - revokedAt;
            await sleep(100);
          }
          return Infinity;
        }),
      );
      for (const elapsed of refusedAfter) expect(elapsed).toBeLessThanOrEqual(5_000);
      for (const app of apps) expectProblem(await ext(app, key.key, 'GET', '/pipelines'), 401, 'unauthorized');
    } finally {
      await others.close();
    }
  });
});
