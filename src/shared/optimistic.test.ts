import { describe, expect, it } from 'vitest';
import { ContendedError, retryLostRaces } from './optimistic.js';

describe('retryLostRaces', () => {
  it('returns the first attempt that wins, after the lost ones', async () => {
    let calls = 0;
    const result = await retryLostRaces('item', 5, async () => (++calls < 3 ? null : 'saved'));
    expect(result).toBe('saved');
    expect(calls).toBe(3);
  });

  it('answers 503 unavailable with Retry-After once every attempt lost', async () => {
    let calls = 0;
    const lost = retryLostRaces('task', 4, async () => {
      calls++;
      return null;
    });
    await expect(lost).rejects.toBeInstanceOf(ContendedError);
    await expect(lost).rejects.toMatchObject({ status: 503, code: 'unavailable', headers: { 'retry-after': '5' } });
    expect(calls).toBe(4);
  });

  it('lets an error of an attempt through at once', async () => {
    let calls = 0;
    const failing = retryLostRaces('pipeline', 4, async () => {
      calls++;
      throw new Error('not found');
    });
    await expect(failing).rejects.toThrow('not found');
    expect(calls).toBe(1);
  });
});
