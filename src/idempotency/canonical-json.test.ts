import { describe, expect, it } from 'vitest';
import { canonicalJson } from './plugin.js';

describe('canonicalJson', () => {
  it('is the same for bodies that differ only in key order and spacing, at any depth', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } })).toBe(
      canonicalJson(JSON.parse('{ "a": { "c": null, "d": [1, { "y": 2, "z": 1 }] }, "b": 1 }')),
    );
  });

  it('tells apart bodies that differ in a value, in array order or in a missing key', () => {
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: '1' }));
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
    expect(canonicalJson({ a: 1, b: null })).not.toBe(canonicalJson({ a: 1 }));
  });
});
