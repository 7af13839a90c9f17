import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyRepository } from '../../src/idempotency/repository.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, ext, type Tenant } from '../helpers/fixtures.js';

// MongoDB's TTL monitor removes an expired record up to a minute later (more under load), so a record past its
// expires_at may still be there: it must count as absent. The records are aged by hand; the stand-in's monitor
// runs every 60 s, so none is removed while the test runs.
let t: TestApp;
let tenant: Tenant;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await createTenant(t.app);
});
afterAll(async () => t?.close());

const records = () => t.db.collection('idempotency_keys');
const expire = (key: string) =>
  records().updateOne({ idempotency_key: key }, { $set: { expires_at: new Date(Date.now() - 1000) } });
const body = (name: string) => ({ name, pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] });
const post = (key: string, name = 'Acme') =>
  ext(t.app, tenant.key, 'POST', '/items', body(name), { 'idempotency-key': key });

describe('idempotency records past expires_at', () => {
  it('are not replayed while still present: the request runs again and its answer is kept instead', async () => {
    const key = `expired-${Date.now()}`;
    const first = await post(key);
    expect(first.statusCode).toBe(201);
    expect((await post(key)).headers['idempotent-replayed']).toBe('true');

    await expire(key);
    expect(await records().countDocuments({ idempotency_key: key })).toBe(1); // still present, as on MongoDB
    const again = await post(key);
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.json().item_id).not.toBe(first.json().item_id);

    const replay = await post(key);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json().item_id).toBe(again.json().item_id);
    expect(await records().countDocuments({ idempotency_key: key })).toBe(1);
  });

  it('do not hold their key against another body (no 422 once expired)', async () => {
    const key = `expired-body-${Date.now()}`;
    expect((await post(key, 'First')).statusCode).toBe(201);
    expect((await post(key, 'Second')).statusCode).toBe(422);
    await expire(key);
    const other = await post(key, 'Second');
    expect(other.statusCode).toBe(201);
    expect(other.json().name).toBe('Second');
  });

  it('are taken over by exactly one of several concurrent claims', async () => {
    const repository = new IdempotencyRepository(t.db);
    const first = await repository.claim('key_concurrent', 'k', 'hash');
    expect(first.claimed).toBe(true);
    await records().updateOne({ _id: 'key_concurrent:k' as never }, { $set: { expires_at: new Date(Date.now() - 1) } });
    expect(await repository.find('key_concurrent:k')).toBeNull();
    const claims = await Promise.all(Array.from({ length: 8 }, () => repository.claim('key_concurrent', 'k', 'hash')));
    expect(claims.filter((claim) => claim.claimed)).toHaveLength(1);
    expect(await repository.find('key_concurrent:k')).toMatchObject({ state: 'in_progress' });
  });
});
