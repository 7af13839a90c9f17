import { describe, expect, it } from 'vitest';
import { HookLanes } from './lanes.js';

describe('lanes', () => {
  it('at most HOOK_MAX_IN_FLIGHT_PER_HOOK in flight, never more than half a lane, and a slow mark while an attempt runs', async () => {
    const lanes = new HookLanes({ maxInFlight: 4, concurrency: 50, timeoutMs: 200 });
    const permits = [];
    for (let i = 0; i < 4; i++) permits.push(lanes.tryAcquire('hk_a'));
    expect(permits.every(Boolean)).toBe(true);
    expect(lanes.tryAcquire('hk_a')).toBeUndefined();
    expect(lanes.tryAcquire('hk_b')).toBeDefined(); // per hook
    // A fan-out waiting for hk_a gets the permit the first finished attempt frees.
    const waiting = lanes.enterFanOut('hk_a');
    permits[0]!.done(true);
    const granted = await waiting;
    expect(granted).toBeDefined();
    expect(lanes.tryAcquire('hk_a')).toBeUndefined();
    // Attempts running past half the timeout mark the hook slow while they still run; waiters go elsewhere.
    const waitingBehindSlow = lanes.enterFanOut('hk_a');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await waitingBehindSlow).toBeUndefined();
    expect(lanes.isSlowOrFailing({ _id: 'hk_a', failing_since: null })).toBe(true);
    for (const permit of [...permits.slice(1), granted]) permit!.done(true); // slow 2xx: stays slow
    expect(lanes.isSlowOrFailing({ _id: 'hk_a', failing_since: null })).toBe(true);
    const quick = lanes.tryAcquire('hk_a');
    quick!.done(true); // a 2xx in time: fast again
    expect(lanes.isSlowOrFailing({ _id: 'hk_a', failing_since: null })).toBe(false);
    expect(lanes.isSlowOrFailing({ _id: 'hk_c', failing_since: new Date() })).toBe(true);

    const small = new HookLanes({ maxInFlight: 4, concurrency: 2, timeoutMs: 200 });
    expect(small.perHookLimit).toBe(1);
    const only = await small.enterFanOut('hk_a');
    expect(only).toBeDefined();
    expect(await small.enterFanOut('hk_a')).toBeUndefined(); // half of 2 fan-out slots: the other stays free
    only!.done(true);
  });
});

describe('lanes: waiting', () => {
  it('a fan-out waits for a fast hook at its limit at most half the timeout, then goes to the other lane', async () => {
    const lanes = new HookLanes({ maxInFlight: 1, concurrency: 10, timeoutMs: 2_000 });
    const first = lanes.tryAcquire('hk_a');
    const started = Date.now();
    const waiting = lanes.enterFanOut('hk_a');
    expect(lanes.tryAcquire('hk_a')).toBeUndefined();
    first!.done(false); // a failed attempt in time: frees the permit, no slow mark
    const granted = await waiting;
    expect(granted).toBeDefined();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(lanes.isSlowOrFailing({ _id: 'hk_a', failing_since: null })).toBe(false);
    granted!.done(true);
    expect(lanes.retryLaterMs(0, () => 0)).toBe(1_000);
    expect(lanes.retryLaterMs(10, () => 0.5)).toBe(1_000 * 4 * 1.5);
  });
});
