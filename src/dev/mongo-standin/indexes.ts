// One secondary index: its spec, key extraction with MongoDB's multikey /
// sparse / partial semantics, and in-memory maps used both to enforce
// uniqueness and to fast-path equality lookups on the index's leading fields.

import { must } from '../../shared/must.js';
import { CommandError, fail, notImplemented } from './errors.js';
import { compileFilter } from './query.js';
import {
  type Doc,
  EMPTY_ARRAY,
  formatValue,
  isPlainObject,
  keyOf,
  MISSING,
  pathValues,
  topLevelField,
} from './values.js';

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

/**
 * The documents holding one key: an id alone until a second one shares it (most keys of an index ending in a
 * unique field have one owner, and a Set for each would be most of the stand-in's memory and collection work).
 */
export type Owners = string | Set<string>;

export function ownerIds(owners: Owners): Iterable<string> {
  return typeof owners === 'string' ? [owners] : owners;
}

export function ownerCount(owners: Owners): number {
  return typeof owners === 'string' ? 1 : owners.size;
}

/** Keys of one document in one index (null when the document is not indexed). */
export interface IndexKeys {
  /** One value tuple per multikey combination. */
  tuples: unknown[][];
  /** prefixes[i]: distinct serialized keys of the first i+1 fields, for the prefixes the index keeps (see byPrefix). */
  prefixes: string[][];
}

export function serializeKey(values: unknown[]): string {
  return values.map(keyOf).join('\u0000');
}

// Options we keep in the spec; anything else is either ignored or rejected below.
const KEPT = ['unique', 'sparse', 'partialFilterExpression', 'expireAfterSeconds', 'hidden'] as const;
const IGNORED = new Set(['v', 'key', 'name', 'background', 'ns', 'storageEngine', 'dropDups']);
const UNSUPPORTED_KEY_TYPES = new Set(['text', '2d', '2dsphere', 'geoHaystack', 'columnstore']);

function isWildcardField(field: string): boolean {
  return field === '$**' || (field.endsWith('.$**') && !field.slice(0, -4).includes('$'));
}

export function defaultIndexName(key: Doc): string {
  return Object.entries(key)
    .map(([k, v]) => `${k}_${v}`)
    .join('_');
}

/** Validates a createIndexes entry and normalises it into a stored spec. */
export function normaliseSpec(raw: unknown): IndexSpec {
  if (!isPlainObject(raw)) fail('TypeMismatch', 'each index specification must be an object');
  const key = raw.key;
  if (!isPlainObject(key) || Object.keys(key).length === 0) fail('CannotCreateIndex', 'Index keys cannot be empty.');
  for (const [field, dir] of Object.entries(key)) {
    if (typeof dir === 'string') {
      if (UNSUPPORTED_KEY_TYPES.has(dir) || field.includes('$**')) notImplemented(`'${dir}' indexes`);
      if (dir !== 'hashed') fail('CannotCreateIndex', `Unknown index plugin '${dir}'`);
    } else if (typeof dir !== 'number' || dir === 0 || Number.isNaN(dir)) {
      fail('CannotCreateIndex', `Values in the index key pattern can't be 0 or non-numeric: ${formatValue(key)}`);
    }
    if (field.includes('$**') && !isWildcardField(field)) notImplemented('wildcard indexes other than path.$**');
  }
  // A (compound) wildcard index, as MongoDB 7.0 accepts it: one wildcard field, never unique or TTL. The
  // stand-in keeps it for its leading fields only; its queries are answered by scanning anyway.
  const wildcards = Object.keys(key).filter(isWildcardField);
  if (wildcards.length > 1) fail('CannotCreateIndex', 'A compound wildcard index must have exactly one wildcard field');
  if (wildcards.length === 1 && (raw.unique || raw.expireAfterSeconds !== undefined)) {
    fail('CannotCreateIndex', 'Index type wildcard does not support the unique or expireAfterSeconds options');
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
      if (!Number.isFinite(secs) || secs < 0)
        fail('CannotCreateIndex', "TTL index 'expireAfterSeconds' option must be a non-negative number");
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
  /** Whether equality lookups may use the maps (a partial index lacks documents; a numeric path component is positional). */
  readonly usableForLookup: boolean;
  /**
   * byPrefix[i]: serialized key of the first i+1 fields → ids of the documents holding it; only for the prefixes
   * before `_id`. A key that includes the _id belongs to one document: a lookup with the _id goes to the _id map
   * instead, and a unique index holding the _id cannot be violated, so keeping those keys (one distinct entry per
   * document and index, most of the stand-in's memory) would serve nothing.
   *
   * Only the first `maintained` maps are kept up to date: none until a lookup needs one (then built from the
   * documents, see lookup), all of a unique index's (its conflicts). An index no query has used costs an insert
   * no map entries, as an unread index costs MongoDB only its B-tree insert: most of the stand-in's insert time
   * was index maps nothing read (the `events` and `tasks` list indexes while a benchmark creates tasks).
   */
  private readonly byPrefix: Array<Map<string, Owners>>;
  /** How many leading maps of byPrefix are kept up to date (see above). */
  private maintained: number;
  private readonly partial?: (doc: Doc) => boolean;

  constructor(readonly spec: IndexSpec) {
    this.fields = Object.keys(spec.key);
    this.isId = spec.name === '_id_';
    const idAt = this.fields.indexOf('_id');
    this.byPrefix = this.fields.slice(0, idAt === -1 ? undefined : idAt).map(() => new Map());
    if (spec.partialFilterExpression) this.partial = compileFilter(spec.partialFilterExpression);
    this.usableForLookup =
      !this.isId && !this.partial && this.byPrefix.length > 0 && !this.fields.some((f) => /(^|\.)\d+(\.|$)/.test(f));
    this.maintained = spec.unique ? this.byPrefix.length : 0;
  }

  static idIndex(): Index {
    return new Index({ v: 2, key: { _id: 1 }, name: '_id_' });
  }

  /** Whether an update touching these top-level fields can change this index's entries (a partial one: always). */
  mayChange(touched: Set<string>): boolean {
    return this.partial !== undefined || this.fields.some((field) => touched.has(topLevelField(field)));
  }

  covers(doc: Doc): boolean {
    return !this.partial || this.partial(doc);
  }

  keys(doc: Doc): IndexKeys | null {
    if (!this.covers(doc)) return null;
    // Nothing kept: only what MongoDB would refuse is looked for (one field cannot make parallel arrays).
    if (this.maintained === 0 && this.fields.length === 1) return NO_ENTRIES;
    const perField = this.fields.map((f) => dedupe(pathValues(doc, f)));
    if (this.spec.sparse && perField.every((vals) => vals.every((v) => v === MISSING))) return null;
    if (perField.filter((vals) => vals.length > 1).length > 1) {
      fail('CannotIndexParallelArrays', `cannot index parallel arrays [${this.fields.join('] [')}]`);
    }
    const kept = this.maintained;
    if (kept === 0) return NO_ENTRIES;
    if (perField.every((vals) => vals.length === 1))
      return singleEntryKeys(
        perField.map((vals) => vals[0]),
        kept,
      );
    let tuples: unknown[][] = [[]];
    for (const vals of perField) tuples = tuples.flatMap((t) => vals.map((v) => [...t, v]));
    const prefixes = this.byPrefix
      .slice(0, kept)
      .map((_, i) => [...new Set(tuples.map((t) => serializeKey(t.slice(0, i + 1))))]);
    return { tuples, prefixes };
  }

  /** The conflicting key tuple when inserting `keys` for document `selfId`. */
  conflict(keys: IndexKeys, selfId: string | undefined): unknown[] | null {
    if (!this.spec.unique || this.byPrefix.length < this.fields.length) return null; // no two documents share an _id
    const full = must(this.byPrefix[this.fields.length - 1], 'a map per key prefix');
    for (const t of keys.tuples) {
      const owners = full.get(serializeKey(t));
      if (owners !== undefined && [...ownerIds(owners)].some((id) => id !== selfId)) return t;
    }
    return null;
  }

  add(id: string, keys: IndexKeys): void {
    keys.prefixes.forEach((list, i) => {
      const map = must(this.byPrefix[i], 'a map per key prefix');
      for (const k of list) {
        const owners = map.get(k);
        if (owners === undefined) map.set(k, id);
        else if (typeof owners !== 'string') owners.add(id);
        else if (owners !== id) map.set(k, new Set([owners, id]));
      }
    });
  }

  remove(id: string, keys: IndexKeys): void {
    keys.prefixes.forEach((list, i) => {
      const map = must(this.byPrefix[i], 'a map per key prefix');
      for (const k of list) {
        const owners = map.get(k);
        if (owners === id || (typeof owners === 'object' && owners.delete(id) && owners.size === 0)) map.delete(k);
      }
    });
  }

  /**
   * Id sets of documents that may match equality conditions on the longest
   * usable prefix of this index, or undefined if the first field has none.
   * Sets are returned unmerged so the caller can pick the cheapest index first.
   */
  lookup(eqs: Map<string, unknown[]>, docs: ReadonlyMap<string, Doc>): Owners[] | undefined {
    const { combos, length } = this.equalityCombos(eqs);
    if (length === 0) return undefined;
    if (length > this.maintained) this.build(length, docs);
    const map = must(this.byPrefix[length - 1], 'a map per key prefix');
    return combos.map((c) => map.get(serializeKey(c))).filter((owners): owners is Owners => owners !== undefined);
  }

  /**
   * How many leading fields a lookup with these equalities would use (0: none), and whether their map is kept
   * already: the planner prefers an index it need not build.
   */
  usablePrefix(eqs: Map<string, unknown[]>): { length: number; kept: boolean } {
    const { length } = this.equalityCombos(eqs);
    return { length, kept: length > 0 && length <= this.maintained };
  }

  /**
   * The value tuples of the longest prefix of fields before `_id` with equality conditions (at most 1,000
   * combinations), and that prefix's length: an empty `$in` makes no tuples, a lookup that finds nothing.
   */
  private equalityCombos(eqs: Map<string, unknown[]>): { combos: unknown[][]; length: number } {
    let combos: unknown[][] = [[]];
    let length = 0;
    for (const f of this.fields.slice(0, this.byPrefix.length)) {
      const vals = eqs.get(f);
      if (!vals || combos.length * vals.length > 1000) break;
      combos = combos.flatMap((c) => vals.map((v) => [...c, v]));
      length++;
    }
    return { combos, length };
  }

  /** Starts keeping the first `length` maps: built from the documents, then kept up to date with every write. */
  private build(length: number, docs: ReadonlyMap<string, Doc>): void {
    this.maintained = length;
    for (let i = 0; i < length; i++) this.byPrefix[i] = new Map();
    for (const [id, doc] of docs) {
      const keys = this.keys(doc);
      if (keys) this.add(id, keys);
    }
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

/** The keys of a document in an index that keeps no maps yet (see Index.maintained). */
const NO_ENTRIES: IndexKeys = Object.freeze({ tuples: [], prefixes: [] });

/** Keys of a document with one value per indexed field (no multikey): the usual case, each value serialized once. */
function singleEntryKeys(tuple: unknown[], kept: number): IndexKeys {
  const prefixes: string[][] = [];
  let key = '';
  for (const [i, value] of tuple.slice(0, kept).entries()) {
    key = i === 0 ? keyOf(value) : `${key}\u0000${keyOf(value)}`; // serializeKey of the first i+1 values
    prefixes.push([key]);
  }
  return { tuples: [tuple], prefixes };
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
  for (const v of pathValues(doc, must(index.fields[0], 'an indexed field'))) {
    if (v instanceof Date && v.getTime() < earliest) earliest = v.getTime();
  }
  return earliest + secs * 1000;
}
