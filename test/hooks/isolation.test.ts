import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { createTask, createTenant, ext } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { Receiver } from './receiver.js';

// One fan-out job at a time and a 1 s timeout make a hanging receiver's cost visible.
let t: TestApp;
let workers: { close(): Promise<void> };
const receivers: Receiver[] = [];
beforeAll(async () => {
  t = await buildTestApp(
    { RATE_LIMIT_MAX: '100000', HOOK_CONCURRENCY: '1', HOOK_TIMEOUT_MS: '1000', HOOK_BACKOFF_MS: '60000' },
    { publisher: true },
  );
  workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks']);
});
afterAll(async () => {
  await workers?.close();
  await Promise.all(receivers.map((receiver) => receiver.close()));
  await t?.close();
});

describe('a failing receiver', () => {
  it('does not hold up the fan-out: once failing, its deliveries run as jobs of their own', async () => {
    const tenant = await createTenant(t.app);
    const healthy = await Receiver.start(() => 200);
    const dead = await Receiver.start(() => 'hang');
    receivers.push(healthy, dead);
    for (const inbox of [healthy, dead]) {
      expect(
        (await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: 'task.created' })).statusCode,
      ).toBe(201);
    }
    // The first event tries both at once; the dead one times out and its hook is now failing.
    await createTask(t.app, tenant);
    await waitFor(
      async () =>
        (await t.db
          .collection('hooks')
          .countDocuments({ company_id: tenant.companyId, failing_since: { $ne: null } })) === 1,
    );

    const started = Date.now();
    await createTask(t.app, tenant);
    await createTask(t.app, tenant);
    await waitFor(() => healthy.requests.length === 3, 5_000, 10);
    // Both fan-outs ran one after the other without waiting out the dead receiver's 1 s timeout.
    expect(Date.now() - started).toBeLessThan(800);
  });
});
