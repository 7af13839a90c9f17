import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

export const KEY_PREFIX = 'prk_';
/** `prk_` + base64url of 32 random bytes (43 characters); anything else is rejected before any lookup. */
const KEY_FORMAT = /^prk_[A-Za-z0-9_-]{43,128}$/;
const DISPLAY_PREFIX_LENGTH = KEY_PREFIX.length + 8;

export function generateApiKey(): { value: string; hash: string; displayPrefix: string } {
  const value = KEY_PREFIX + randomBytes(32).toString('base64url');
  return { value, hash: hashApiKey(value), displayPrefix: displayPrefixOf(value) };
}

/** What lists show of a key (`prk_AbCd1234`): enough to tell keys apart, useless to authenticate. */
export function displayPrefixOf(value: string): string {
  return value.slice(0, DISPLAY_PREFIX_LENGTH);
}

export function hashApiKey(value: string): string {
  return hash('sha256', value, 'hex'); // one-shot: no Hash object per request
}

export function isWellFormedApiKey(value: unknown): value is string {
  return typeof value === 'string' && KEY_FORMAT.test(value);
}

/**
 * Constant-time comparison of two digests. The strings' own bytes are compared: hex-decoding would
 * silently drop anything after a non-hex character, making `"ab"` equal `"abzz"`.
 */
export function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}
