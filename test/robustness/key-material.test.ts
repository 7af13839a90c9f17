import { timingSafeEqual } from 'node:crypto';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { hashApiKey, hashesEqual, isWellFormedApiKey } from '../../src/auth/key-material.js';
import type * as Crypto from 'node:crypto';

// The real timingSafeEqual, watched, to show that key hashes are compared through it.
vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof Crypto>();
  return { ...actual, timingSafeEqual: vi.fn(actual.timingSafeEqual) };
});

describe('API key hash comparison (OWASP API2)', () => {
  const hash = hashApiKey(`prk_${'a'.repeat(43)}`);
  beforeEach(() => {
    vi.mocked(timingSafeEqual).mockClear();
  });

  it('compares equal-length hashes in constant time', () => {
    expect(hashesEqual(hash, hashApiKey(`prk_${'a'.repeat(43)}`))).toBe(true);
    expect(hashesEqual(hash, hashApiKey(`prk_${'b'.repeat(43)}`))).toBe(false);
    expect(timingSafeEqual).toHaveBeenCalledTimes(2);
  });

  it('answers false, without throwing, for different lengths', () => {
    expect(hashesEqual(hash, hash.slice(0, 32))).toBe(false);
    expect(hashesEqual('', hash)).toBe(false);
  });

  it('never equates strings that only agree up to a non-hex character', () => {
    expect(hashesEqual('abzz', 'abyy')).toBe(false);
    expect(hashesEqual('zz', 'yy')).toBe(false);
  });

  it('treats only prk_ plus 43-128 base64url characters as a key worth looking up', () => {
    expect(isWellFormedApiKey(`prk_${'A'.repeat(43)}`)).toBe(true);
    for (const value of [
      undefined,
      42,
      '',
      'prk_',
      `prk_${'A'.repeat(42)}`,
      `prk_${'A'.repeat(129)}`,
      `prk_${'+'.repeat(43)}`,
      `PRK_${'A'.repeat(43)}`,
    ]) {
      expect(isWellFormedApiKey(value)).toBe(false);
    }
  });
});
