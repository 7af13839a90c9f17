// One secondary index: its spec, key extraction with MongoDB's multikey /
// sparse / partial semantics, and in-memory maps used both to enforce
// uniqueness and to fast-path equality lookups on the index's first field.

import { CommandError, fail, notImplemented } from './errors.js';
import { compileFilter } from './query.js';
import { type Doc, EMPTY_ARRAY, formatValue, isPlainObject, keyOf, MISSING, pathValues } from './values.js';

export interface IndexSpec {
  v: number;
  key: Doc;
  name: string;
  unique?: boolean;
  sparse?: boolean;
  partialFilterExpression?: Doc;
  expireAfterSeconds?: number;
  hidden?: boolean;
}

/** Keys of one document in one index (null when the document is not indexed). */
export interface IndexKeys {
  /** One value tuple per multikey combination. */
  tuples: unknown[][];
  /** Serialized full keys, aligned with tuples. */
  full: string[];
  /** Distinct serialized values of the first field. */
  first: string[];
}

// Options we keep in the spec; anything else is either ignored or rejected below.
const KEPT = ['unique', 'sparse', 'partialFilterExpression', 'expireAfterSeconds', 'hidden'] as const;
const IGNORED = new Set(['v', 'key', 'name', 'background', 'ns', 'storageEngine', 'dropDups']);
const UNSUPPORTED_KEY_TYPES = new Set(['text', '2d', '2dsphere', 'geoHaystack', 'columnstore']);

export function defaultIndexName(key: Doc): string {
  return Object.entries(key)
    .map(([k, v]) => `${k}_${v}`)
    .join('_');
}

/** Validates a createIndexes entry and normalises it into a stored spec. */
export function normaliseSpec(raw: unknown): IndexSpec {
  if (!isPlainObject(raw)) fail('TypeMismatch', 'each index specification must be an object');
  const key = raw.key;
  if (!isPlainObject(key) || Object.keys(key).length === 0) fail('CannotCreateIndex', "Index keys cannot be empty.");
  for (const [field, dir] of Object.entries(key)) {
    if (typeof dir === 'string') {
      if (UNSUPPORTED_KEY_TYPES.has(dir) || field.includes('$**')) notImplemented(`'${dir}' indexes`);
      if (dir !== 'hashed') fail('CannotCreateIndex', `Unknown index plugin '${dir}'`);
    } else if (typeof dir !== 'number' || dir === 0 || Number.isNaN(dir)) {
      fail('CannotCreateIndex', `Values in the index key pattern can't be 0 or non-numeric: ${formatValue(key)}`);
    }
    if (field.includes('$**')) notImplemented('wildcard indexes');
  }
  const spec: IndexSpec = { v: 2, key, name: typeof raw.name === 'string' ? raw.name : defaultIndexName(key) };
  for (const opt of Object.keys(raw)) {
    if (IGNORED.has(opt) || (KEPT as readonly string[]).includes(opt)) continue;
    if (opt === 'collation' && isPlainObject(raw.collation) && raw.collation.locale === 'simple') continue;
    notImplemented(`index option '${opt}'`);
  }
  for (const opt of KEPT) {
    if (raw[opt] === undefined) continue;
    if (opt === 'unique' || opt === 'sparse' || opt === 'hidden') {
      if (raw[opt]) spec[opt] = true;
    } else if (opt === 'partialFilterExpression') {
      if (!isPlainObject(raw[opt])) fail('TypeMismatch', 'partialFilterExpression must be an object');
      spec.partialFilterExpression = raw[opt];
    } else {
      const secs = Number(raw[opt]);
      if (!Number.isFinite(secs) || secs < 0) fail('CannotCreateIndex', 'TTL index \'expireAfterSeconds\' option must be a non-negative number');
      spec.expireAfterSeconds = secs;
    }
  }
  if (spec.sparse && spec.partialFilterExpression) {
    fail('CannotCreateIndex', 'cannot mix "partialFilterExpression" and "sparse" options');
  }
  if (spec.expireAfterSeconds !== undefined && Object.keys(key).length !== 1) {
    fail('CannotCreateIndex', 'TTL indexes are single-field indexes, compound indexes do not support TTL.');
  }
  return spec;
}

export class Index {
  readonly fields: string[];
  readonly isId: boolean;
  readonly byFirst = new Map<string, Set<string>>();
  readonly byFull = new Map<string, string>();
  private readonly partial?: (doc: Doc) => boolean;

  constructor(readonly spec: IndexSpec) {
    this.fields = Object.keys(spec.key);
    this.isId = spec.name === '_id_';
    if (spec.partialFilterExpression) this.partial = compileFilter(spec.partialFilterExpression);
  }

  static idIndex(): Index {
    return new Index({ v: 2, key: { _id: 1 }, name: '_id_' });
  }

  get unique(): boolean {
    return this.isId || !!this.spec.unique;
  }

  /** Whether equality on the first field can be answered from byFirst. */
  get usableForLookup(): boolean {
    return !this.isId && !this.partial && !/\.\d+(\.|$)/.test(this.fields[0]);
  }

  covers(doc: Doc): boolean {
    return !this.partial || this.partial(doc);
  }

  keys(doc: Doc): IndexKeys | null {
    if (!this.covers(doc)) return null;
    const perField = this.fields.map((f) => dedupe(pathValues(doc, f)));
    if (this.spec.sparse && perField.every((vals) => vals.every((v) => v === MISSING))) return null;
    if (perField.filter((vals) => vals.length > 1).length > 1) {
      fail('CannotIndexParallelArrays', `cannot index parallel arrays [${this.fields.join('] [')}]`);
    }
    let tuples: unknown[][] = [[]];
    for (const vals of perField) tuples = tuples.flatMap((t) => vals.map((v) => [...t, v]));
    return {
      tuples,
      full: tuples.map((t) => t.map(keyOf).join('\u0000')),
      first: [...new Set(perField[0].map(keyOf))],
    };
  }

  /** The conflicting key tuple when inserting `keys` for document `selfId`. */
  conflict(keys: IndexKeys, selfId: string | undefined): unknown[] | null {
    if (!this.spec.unique) return null;
    for (let i = 0; i < keys.full.length; i++) {
      const owner = this.byFull.get(keys.full[i]);
      if (owner !== undefined && owner !== selfId) return keys.tuples[i];
    }
    return null;
  }

  add(id: string, keys: IndexKeys): void {
    if (this.spec.unique) for (const k of keys.full) this.byFull.set(k, id);
    for (const k of keys.first) {
      let set = this.byFirst.get(k);
      if (!set) this.byFirst.set(k, (set = new Set()));
      set.add(id);
    }
  }

  remove(id: string, keys: IndexKeys): void {
    if (this.spec.unique) for (const k of keys.full) if (this.byFull.get(k) === id) this.byFull.delete(k);
    for (const k of keys.first) {
      const set = this.byFirst.get(k);
      if (set && set.delete(id) && set.size === 0) this.byFirst.delete(k);
    }
  }

  clear(): void {
    this.byFirst.clear();
    this.byFull.clear();
  }

  /** The E11000 error for a conflicting key tuple, in the server's exact shape. */
  duplicateError(ns: string, tuple: unknown[], prefix = ''): CommandError {
    const keyValue: Doc = {};
    this.fields.forEach((f, i) => (keyValue[f] = exportValue(tuple[i])));
    const shown = this.fields.map((f, i) => `${f}: ${formatValue(tuple[i])}`).join(', ');
    return new CommandError(
      'DuplicateKey',
      `${prefix}E11000 duplicate key error collection: ${ns} index: ${this.spec.name} dup key: { ${shown} }`,
      { keyPattern: { ...this.spec.key }, keyValue },
    );
  }
}

function exportValue(v: unknown): unknown {
  if (v === MISSING) return null;
  if (v === EMPTY_ARRAY) return undefined;
  return v;
}

function dedupe(vals: unknown[]): unknown[] {
  if (vals.length < 2) return vals;
  const seen = new Set<string>();
  return vals.filter((v) => {
    const k = keyOf(v);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** Expiry timestamp (ms) of a document under a TTL index, Infinity if none. */
export function ttlExpiry(index: Index, doc: Doc): number {
  const secs = index.spec.expireAfterSeconds;
  if (secs === undefined || !index.covers(doc)) return Infinity;
  let earliest = Infinity;
  for (const v of pathValues(doc, index.fields[0])) {
    if (v instanceof Date && v.getTime() < earliest) earliest = v.getTime();
  }
  return earliest + secs * 1000;
}
