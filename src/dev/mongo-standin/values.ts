// Value helpers: deep clone, canonical keys for index maps, dotted-path
// extraction with MongoDB's array expansion, and mongo-shell-ish formatting
// for error messages.

import { must } from '../../shared/must.js';

// A stored document holds any BSON value at any depth; the stand-in's evaluators narrow as they go.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Doc = Record<string, any>;

/** Marker for "path does not exist" while extracting index keys. */
export const MISSING: unique symbol = Symbol('missing');
/** Marker for an empty terminal array (MongoDB indexes it as `undefined`). */
export const EMPTY_ARRAY: unique symbol = Symbol('emptyArray');

export function isPlainObject(v: unknown): v is Doc {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function bsonType(v: unknown): string | undefined {
  return v !== null && typeof v === 'object' ? (v as { _bsontype?: string })._bsontype : undefined;
}

/**
 * Deep clone of plain objects, arrays and Dates. BSON value classes
 * (ObjectId, Long, Decimal128, ...) are immutable in practice and shared.
 */
export function clone<T>(v: T): T {
  if (Array.isArray(v)) return v.map(clone) as T;
  if (v instanceof Date) return new Date(v.getTime()) as T;
  if (isPlainObject(v)) {
    const out: Doc = {};
    for (const k of Object.keys(v)) out[k] = clone(v[k]);
    return out as T;
  }
  return v;
}

/**
 * Canonical string for a value, equal for values MongoDB treats as equal
 * (within reason: Decimal128 vs number equality is not unified).
 */
export function keyOf(v: unknown): string {
  if (v === MISSING || v === null) return 'N';
  if (v === undefined || v === EMPTY_ARRAY) return 'u';
  switch (typeof v) {
    case 'number':
      return 'n' + (Object.is(v, -0) ? 0 : v);
    case 'string':
      return 's' + v;
    case 'boolean':
      return v ? 'b1' : 'b0';
    case 'bigint':
      return 'n' + v.toString();
  }
  if (v instanceof Date) return 'd' + v.getTime();
  if (v instanceof RegExp) return 'r' + v.source + '/' + v.flags;
  if (Array.isArray(v)) return 'a' + JSON.stringify(v.map(keyOf));
  const t = bsonType(v);
  if (t === 'ObjectId') return 'o' + (v as { toHexString(): string }).toHexString();
  if (t === 'Long' || t === 'Int32' || t === 'Double') return 'n' + bsonText(v);
  if (t === 'Binary') {
    const b = v as { sub_type: number; toString(enc: string): string };
    return 'B' + b.sub_type + ':' + b.toString('base64');
  }
  if (t) return '_' + t + ':' + JSON.stringify(v);
  if (isPlainObject(v)) return 'O' + JSON.stringify(Object.keys(v).map((k) => [k, keyOf(v[k])]));
  return '?' + bsonText(v);
}

/**
 * All values at a dotted path, expanding arrays the way MongoDB index keys do:
 * arrays along the path are traversed element-wise, a terminal array
 * contributes its elements, and a missing path yields MISSING.
 */
export function pathValues(doc: unknown, path: string): unknown[] {
  const out: unknown[] = [];
  collect(doc, path.split('.'), 0, out);
  return out;
}

/** `a` for the path `a.b.c`. */
export function topLevelField(path: string): string {
  const dot = path.indexOf('.');
  return dot === -1 ? path : path.slice(0, dot);
}

function collect(value: unknown, parts: string[], i: number, out: unknown[]): void {
  if (i === parts.length) {
    if (Array.isArray(value)) {
      if (value.length === 0) out.push(EMPTY_ARRAY);
      else out.push(...value);
    } else out.push(value === undefined ? MISSING : value);
    return;
  }
  const part = must(parts[i], 'a path segment below parts.length');
  if (Array.isArray(value)) {
    if (/^\d+$/.test(part)) {
      collect(value[Number(part)], parts, i + 1, out);
      return;
    }
    if (value.length === 0) out.push(MISSING);
    for (const el of value) collect(el, parts, i, out);
    return;
  }
  if (isPlainObject(value) && Object.hasOwn(value, part)) {
    collect(value[part], parts, i + 1, out);
    return;
  }
  out.push(MISSING);
}

/** Plain dotted-path read without array expansion (undefined if absent). */
export function getPath(doc: unknown, path: string): unknown {
  let cur: unknown = doc;
  for (const part of path.split('.')) {
    if (Array.isArray(cur) && /^\d+$/.test(part)) cur = cur[Number(part)];
    else if (isPlainObject(cur) && Object.hasOwn(cur, part)) cur = cur[part];
    else return undefined;
  }
  return cur;
}

/** Values as the mongo shell prints them, used in E11000 messages. */
export function formatValue(v: unknown): string {
  if (v === MISSING || v === null) return 'null';
  if (v === undefined || v === EMPTY_ARRAY) return 'undefined';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (v instanceof Date) return `new Date(${v.getTime()})`;
  if (v instanceof RegExp) return String(v);
  if (Array.isArray(v)) return '[ ' + v.map(formatValue).join(', ') + ' ]';
  const t = bsonType(v);
  if (t === 'ObjectId') return `ObjectId('${(v as { toHexString(): string }).toHexString()}')`;
  if (t === 'Decimal128') return `NumberDecimal("${bsonText(v)}")`;
  if (t === 'Long') return bsonText(v);
  if (t) return `${t}(${JSON.stringify(bsonText(v))})`;
  if (isPlainObject(v)) {
    const keys = Object.keys(v);
    return keys.length ? '{ ' + keys.map((k) => `${k}: ${formatValue(v[k])}`).join(', ') + ' }' : '{}';
  }
  return bsonText(v);
}

/** BSON values (Long, Decimal128, ...) print themselves; anything else left here is a primitive. */
function bsonText(v: unknown): string {
  return (v as { toString(): string }).toString();
}

export function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'missing';
  if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) < 2 ** 31 ? 'int' : 'double';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  const t = bsonType(v);
  if (t) return t === 'ObjectId' ? 'objectId' : t.toLowerCase();
  return 'object';
}

export function isNumeric(v: unknown): boolean {
  const t = bsonType(v);
  return typeof v === 'number' || t === 'Long' || t === 'Decimal128' || t === 'Int32' || t === 'Double';
}

/** Values usable as exact index-map keys for query fast paths. */
export function isIndexableScalar(v: unknown): boolean {
  if (typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return !Number.isNaN(v);
  if (v instanceof Date) return true;
  const t = bsonType(v);
  return t === 'ObjectId' || t === 'Long';
}

/** The top-level field a dotted path starts with (`a` of `a.b.c`). */
export function topField(path: string): string {
  return path.split('.', 1)[0] ?? path;
}

/** The documents in a random order (Fisher-Yates), for the stand-in's shuffleUnsorted option. */
export function shuffled<T>(source: Iterable<T>): T[] {
  const out = [...source];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
