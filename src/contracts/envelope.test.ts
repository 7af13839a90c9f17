import { describe, expect, it } from 'vitest';
import { capEnvelope, ENVELOPE_MAX_BYTES, ENVELOPE_VALUE_MAX_BYTES } from './envelope.js';

const custom = (field: string) => field !== 'item_id' && field !== 'name';

describe('the envelope cap (issue 59)', () => {
  it('leaves an envelope of small values as it is, the same objects', () => {
    const data = { item_id: 'itm_1', name: 'Deal', notes: 'short' };
    const changes = { notes: { from: null, to: 'short' } };
    const capped = capEnvelope(data, changes, custom);
    expect(capped.data).toBe(data);
    expect(capped.changes).toBe(changes);
  });

  it('replaces cappable values over 4 KiB of JSON by a marker with their size, without touching the input', () => {
    const long = 'é'.repeat(3_000); // 6,002 bytes of JSON
    const data = { item_id: 'itm_1', name: 'x'.repeat(ENVELOPE_VALUE_MAX_BYTES), notes: long, tags: ['a'] };
    const changes = { notes: { from: 'before', to: long }, name: { from: 'a', to: data.name } };
    const capped = capEnvelope(data, changes, custom);
    expect(capped.data).toEqual({ ...data, notes: { truncated: true, bytes: 6_002 } });
    expect(capped.changes).toEqual({
      notes: { from: 'before', to: { truncated: true, bytes: 6_002 } },
      name: { from: 'a', to: data.name },
    });
    expect(data.notes).toBe(long);
    expect(changes.notes.to).toBe(long);
  });

  it('past 256 KiB in all, replaces the largest values under the cap, largest first, until it fits', () => {
    const data: Record<string, unknown> = { item_id: 'itm_1', name: 'Deal' };
    for (let i = 0; i < 100; i++) data[`f${i}`] = 'v'.repeat(2_500 + i * 10);
    const capped = capEnvelope(data, undefined, custom);
    expect(Buffer.byteLength(JSON.stringify(capped))).toBeLessThanOrEqual(ENVELOPE_MAX_BYTES);
    const replaced = Object.keys(data).filter((key) => typeof capped.data[key] === 'object');
    expect(replaced.length).toBeGreaterThan(0);
    // The longest ones (the last fields) went, the rest are whole.
    expect(replaced).toEqual(Array.from({ length: replaced.length }, (_, i) => `f${99 - replaced.length + 1 + i}`));
    expect(capped.data.f0).toBe(data.f0);
  });
});
