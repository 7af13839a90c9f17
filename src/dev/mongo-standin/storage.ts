// In-memory databases and collections. Documents are kept as decoded JS
// objects keyed by their serialized _id (Map order = natural order) and are
// never mutated in place: updates build a new object and swap it in, so
// cursor snapshots and index maps stay consistent.

import { BSON, ObjectId, UUID } from 'bson';
import { CommandError, fail } from './errors.js';
import { Index, type IndexKeys, type IndexSpec, type Owners, ownerCount, ownerIds, ttlExpiry } from './indexes.js';
import { type Doc, formatValue, isIndexableScalar, isPlainObject, keyOf } from './values.js';

/** MongoDB's limit on a stored document (BSONObjMaxUserSize), and the larger one on any BSON object it parses. */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;
const MAX_INTERNAL_BYTES = MAX_DOCUMENT_BYTES + 16 * 1024;

/**
 * Refuses a document MongoDB would not store, with its codes: an insert beyond the internal limit fails as the server's
 * BSON parser does (10334), one between the two limits as "too large" (2); a document an update grows past 16 MiB, 17419.
 */
export function checkDocumentSize(doc: Doc, origin: 'insert' | 'update'): void {
  const size = BSON.calculateObjectSize(doc);
  if (size <= MAX_DOCUMENT_BYTES) return;
  if (origin === 'update') {
    fail('Location17419', `Resulting document after update is larger than ${MAX_DOCUMENT_BYTES}`);
  }
  if (size > MAX_INTERNAL_BYTES) {
    const first = Object.keys(doc)[0];
    fail(
      'BSONObjectTooLarge',
      `BSONObj size: ${size} (0x${size.toString(16).toUpperCase()}) is invalid. Size must be between 0 and ${MAX_INTERNAL_BYTES}(16MB) First element: ${first}: ${formatValue(first === undefined ? undefined : doc[first])}`,
    );
  }
  fail('BadValue', `object to insert too large. size in bytes: ${size}, max size: ${MAX_DOCUMENT_BYTES}`);
}

export class Collection {
  readonly docs = new Map<string, Doc>();
  private readonly idIndex = Index.idIndex();
  readonly indexes: Index[] = [this.idIndex];
  readonly uuid = new UUID();
  /** Earliest time any document may expire under a TTL index. */
  private nextExpiry = Infinity;

  constructor(
    readonly db: string,
    readonly name: string,
  ) {}

  get ns(): string {
    return `${this.db}.${this.name}`;
  }

  get secondary(): Index[] {
    return this.indexes.slice(1);
  }

  /** Inserts a document (adding an ObjectId _id, first, if missing). */
  insert(input: Doc): Doc {
    const { _id, ...rest } = input;
    const doc = { _id: _id === undefined ? new ObjectId() : _id, ...rest };
    if (Array.isArray(doc._id)) fail('BadValue', "can't use an array for _id");
    checkIdStorable(doc._id);
    const id = keyOf(doc._id);
    if (this.docs.has(id)) throw this.idIndex.duplicateError(this.ns, [doc._id]);
    const keys = this.checkedKeys(doc, undefined);
    this.docs.set(id, doc);
    this.secondary.forEach((idx, i) => keys[i] && idx.add(id, keys[i]));
    this.noteExpiry(doc);
    return doc;
  }

  /**
   * Swaps in a new version of a stored document (same _id), enforcing unique indexes. With the
   * top-level fields the update touched, indexes on none of them are left alone without a look.
   */
  replace(id: string, next: Doc, touched?: Set<string>): void {
    const prev = this.docs.get(id);
    if (!prev) fail('InternalError', 'replace of a missing document');
    const doc = withIdFirst(next);
    const affected = touched ? this.secondary.filter((idx) => idx.mayChange(touched)) : this.secondary;
    const keys = this.checkedKeys(doc, id, affected);
    affected.forEach((idx, i) => {
      const old = idx.keys(prev);
      if (old && keys[i] && sameKeys(old, keys[i])) return; // most updates leave most indexes alone
      if (old) idx.remove(id, old);
      if (keys[i]) idx.add(id, keys[i]);
    });
    this.docs.set(id, doc);
    this.noteExpiry(doc);
  }

  remove(id: string): boolean {
    const prev = this.docs.get(id);
    if (!prev) return false;
    for (const idx of this.secondary) {
      const keys = idx.keys(prev);
      if (keys) idx.remove(id, keys);
    }
    return this.docs.delete(id);
  }

  /** Keys for every secondary index, throwing E11000 on a unique conflict. */
  private checkedKeys(doc: Doc, selfId: string | undefined, indexes = this.secondary): Array<IndexKeys | null> {
    return indexes.map((idx) => {
      const keys = idx.keys(doc);
      const clash = keys && idx.conflict(keys, selfId);
      if (clash) throw idx.duplicateError(this.ns, clash);
      return keys;
    });
  }

  /** Builds and registers an index; fails (code 11000) if existing data violates it. */
  addIndex(spec: IndexSpec): void {
    const idx = new Index(spec);
    for (const [id, doc] of this.docs) {
      const keys = idx.keys(doc);
      if (!keys) continue;
      const clash = idx.conflict(keys, id);
      if (clash) {
        const e = idx.duplicateError(
          this.ns,
          clash,
          `Index build failed: ${spec.name}: Collection ${this.ns} :: caused by :: `,
        );
        throw new CommandError('DuplicateKey', e.message, e.extra);
      }
      idx.add(id, keys);
    }
    this.indexes.push(idx);
    if (spec.expireAfterSeconds !== undefined) this.nextExpiry = 0;
  }

  dropIndex(name: string): void {
    const i = this.indexes.findIndex((idx) => idx.spec.name === name);
    if (i > 0) this.indexes.splice(i, 1);
  }

  /**
   * Documents that can possibly match `filter`, using the _id map or an
   * index whose leading fields have equality / $in conditions. Returns the
   * whole collection when no index applies; the caller still applies the filter.
   */
  candidates(filter: Doc | undefined): Iterable<Doc> {
    const eqs = filter ? equalities(filter) : undefined;
    if (!eqs || eqs.size === 0) return this.docs.values();
    const idValues = eqs.get('_id');
    if (idValues) {
      return [...new Set(idValues.map(keyOf))].map((k) => this.docs.get(k)).filter((d): d is Doc => d !== undefined);
    }
    // The indexes whose maps are kept; and, when none of them uses as many equality fields as another index
    // could, that one too (Index.lookup builds its maps once).
    const usable = this.secondary
      .filter((idx) => idx.usableForLookup)
      .map((idx) => ({ idx, ...idx.usablePrefix(eqs) }))
      .filter((candidate) => candidate.length > 0);
    const longest = Math.max(0, ...usable.map((candidate) => candidate.length));
    const kept = usable.filter((candidate) => candidate.kept);
    const plan = kept.some((candidate) => candidate.length === longest)
      ? kept
      : [...kept, ...usable.filter((candidate) => candidate.length === longest).slice(0, 1)];
    let best: Owners[] | undefined;
    let bestSize = Infinity;
    for (const { idx } of plan) {
      const hit = idx.lookup(eqs, this.docs);
      const size = hit?.reduce((n, owners) => n + ownerCount(owners), 0) ?? Infinity;
      if (hit && size < bestSize) [best, bestSize] = [hit, size];
    }
    if (!best) return this.docs.values();
    const ids =
      best.length === 1 && best[0] ? ownerIds(best[0]) : new Set(best.flatMap((owners) => [...ownerIds(owners)]));
    return [...ids].map((id) => this.docs.get(id)).filter((d): d is Doc => d !== undefined);
  }

  /** Applies TTL indexes (called by the TTL monitor): removes documents whose expiry has passed. */
  sweepExpired(now: number): void {
    if (now < this.nextExpiry) return;
    const ttl = this.indexes.filter((idx) => idx.spec.expireAfterSeconds !== undefined);
    let next = Infinity;
    for (const [id, doc] of this.docs) {
      const at = Math.min(...ttl.map((idx) => ttlExpiry(idx, doc)));
      if (at < now) this.remove(id);
      else if (at < next) next = at;
    }
    this.nextExpiry = next;
  }

  private noteExpiry(doc: Doc): void {
    for (const idx of this.indexes) {
      if (idx.spec.expireAfterSeconds === undefined) continue;
      this.nextExpiry = Math.min(this.nextExpiry, ttlExpiry(idx, doc));
    }
  }
}

/** MongoDB refuses `$`-prefixed field names anywhere inside an _id (elsewhere they are allowed since 5.0). */
function checkIdStorable(id: unknown): void {
  if (Array.isArray(id)) return id.forEach(checkIdStorable);
  if (!isPlainObject(id)) return;
  for (const [field, value] of Object.entries(id)) {
    if (field.startsWith('$'))
      fail(
        'DollarPrefixedFieldName',
        `_id fields may not contain '$'-prefixed fields: ${field} is not valid for storage.`,
      );
    checkIdStorable(value);
  }
}

function withIdFirst(doc: Doc): Doc {
  if (Object.keys(doc)[0] === '_id') return doc;
  const { _id, ...rest } = doc;
  return { _id, ...rest };
}

/**
 * Equality conditions usable for index lookups: field → candidate values
 * (top-level `field: scalar`, `{$eq}`, `{$in}` and the same inside `$and`).
 * Only scalars are used, so `{a: null}` or array/document equality scan.
 */
function equalities(filter: Doc): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  const visit = (f: Doc): void => {
    for (const [k, v] of Object.entries(f)) {
      if (k === '$and' && Array.isArray(v)) v.forEach((sub) => isPlainObject(sub) && visit(sub));
      if (k.startsWith('$') || out.has(k)) continue;
      if (isIndexableScalar(v)) out.set(k, [v]);
      else if (isPlainObject(v)) {
        if ('$eq' in v && isIndexableScalar(v.$eq)) out.set(k, [v.$eq]);
        else if (Array.isArray(v.$in) && v.$in.every(isIndexableScalar)) out.set(k, v.$in);
      }
    }
  };
  visit(filter);
  return out;
}

export class Store {
  private readonly dbs = new Map<string, Map<string, Collection>>();

  /** Existing collection, or undefined. Expired documents stay until the TTL monitor's next pass, as on MongoDB. */
  get(db: string, name: string): Collection | undefined {
    return this.dbs.get(db)?.get(name);
  }

  /** One pass of the TTL monitor over every collection. */
  sweepExpired(now: number): void {
    for (const colls of this.dbs.values()) for (const coll of colls.values()) coll.sweepExpired(now);
  }

  /** Existing collection or a freshly created one (collections auto-create on write). */
  ensure(db: string, name: string): Collection {
    const existing = this.get(db, name);
    if (existing) return existing;
    validateName(db, name);
    let colls = this.dbs.get(db);
    if (!colls) this.dbs.set(db, (colls = new Map()));
    const coll = new Collection(db, name);
    colls.set(name, coll);
    return coll;
  }

  collections(db: string): Collection[] {
    return [...(this.dbs.get(db)?.values() ?? [])];
  }

  databases(): string[] {
    return [...this.dbs.keys()].filter((db) => (this.dbs.get(db)?.size ?? 0) > 0);
  }

  drop(db: string, name: string): Collection | undefined {
    const colls = this.dbs.get(db);
    const coll = colls?.get(name);
    if (coll) colls!.delete(name);
    return coll;
  }

  dropDatabase(db: string): void {
    this.dbs.delete(db);
  }

  rename(from: Collection, db: string, name: string): void {
    validateName(db, name);
    this.drop(from.db, from.name);
    const moved = new Collection(db, name);
    for (const idx of from.secondary) moved.addIndex(idx.spec);
    for (const doc of from.docs.values()) moved.insert(doc);
    let colls = this.dbs.get(db);
    if (!colls) this.dbs.set(db, (colls = new Map()));
    colls.set(name, moved);
  }
}

function validateName(db: string, name: string): void {
  if (!db || /[/\\. "$\0]/.test(db)) fail('InvalidNamespace', `Invalid database name: '${db}'`);
  if (!name || name.includes('$') || name.includes('\0') || name.startsWith('.')) {
    fail('InvalidNamespace', `Invalid collection name: ${name}`);
  }
}

/** Whether two documents have the very same entries in an index (the longest kept keys decide, the shorter follow). */
function sameKeys(a: IndexKeys, b: IndexKeys): boolean {
  const left = a.prefixes.at(-1) ?? [];
  const right = b.prefixes.at(-1) ?? [];
  return left.length === right.length && left.every((key, i) => key === right[i]);
}
