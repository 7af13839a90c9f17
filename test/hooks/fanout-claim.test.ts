import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimFanOut, FANOUT_CLAIM_SECONDS } from '../../src/hooks/fanout-claim.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { waitFor } from '../helpers/wait.js';

// The fan-out's dedup rule on its own: a real Redis, no queue (the publisher's job is a stub).
let t: TestEnv;
beforeAll(async () => {
  t = await createTestEnv();
  await waitFor(() => t.redis.status === 'ready'); // the request-path client queues nothing while connecting
});
afterAll(async () => t?.close());

const ref = (eventId: string) => ({ event_id: eventId, company_id: 'cmp_claims' });

function deps(publisherJob: boolean) {
  return { redis: t.redis, prefix: t.config.QUEUE_PREFIX, publisherJobExists: async () => publisherJob };
}

describe('which fan-out job of an event delivers it', () => {
  it("the publisher's own job (id = event_id) always does, without a claim", async () => {
    expect(await claimFanOut(deps(true), ref('evt_own'), 'evt_own')).toBe(true);
    expect(await claimFanOut(deps(true), ref('evt_own'), 'evt_own')).toBe(true); // run again after a crash
    expect(await t.redis.exists(`${t.config.QUEUE_PREFIX}:fanout-claim:evt_own`)).toBe(0);
  });

  it("a copy under another id does not while the publisher's job exists", async () => {
    expect(await claimFanOut(deps(true), ref('evt_published'), 'reconciled-1')).toBe(false);
  });

  it('without the publisher job, the first copy claims it (and may run again); later copies do not', async () => {
    expect(await claimFanOut(deps(false), ref('evt_copies'), 'copy-a')).toBe(true);
    expect(await claimFanOut(deps(false), ref('evt_copies'), 'copy-b')).toBe(false);
    expect(await claimFanOut(deps(false), ref('evt_copies'), 'copy-a')).toBe(true);
    const key = `${t.config.QUEUE_PREFIX}:fanout-claim:evt_copies`;
    expect(await t.redis.get(key)).toBe('copy-a');
    const ttl = await t.redis.ttl(key);
    expect(ttl).toBeGreaterThan(FANOUT_CLAIM_SECONDS - 60);
    expect(ttl).toBeLessThanOrEqual(FANOUT_CLAIM_SECONDS);
  });
});
