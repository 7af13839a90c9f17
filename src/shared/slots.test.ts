import { describe, expect, it } from 'vitest';
import { Slots } from './slots.js';

describe('Slots', () => {
  it('takes a free slot without a promise, and makes waiters wait once all are taken', () => {
    const slots = new Slots(2);
    expect(slots.take()).toBeUndefined();
    expect(slots.take()).toBeUndefined();
    expect(slots.take()).toBeInstanceOf(Promise);
    expect(slots.inUse).toBe(2);
  });

  it('hands a released slot to the longest waiter, and frees it when nobody waits', async () => {
    const slots = new Slots(1);
    expect(slots.take()).toBeUndefined();
    const order: string[] = [];
    const first = slots.take()!.then(() => order.push('first'));
    const second = slots.take()!.then(() => order.push('second'));
    slots.release();
    await first;
    expect(order).toEqual(['first']);
    expect(slots.inUse).toBe(1);
    slots.release();
    await second;
    expect(order).toEqual(['first', 'second']);
    slots.release();
    expect(slots.inUse).toBe(0);
    expect(slots.take()).toBeUndefined();
  });
});
