// Shared types and argument checking for command handlers.

import { fail, notImplemented } from '../errors.js';
import { type Doc, formatValue, isNumeric, isPlainObject, keyOf, typeName } from '../values.js';
import type { Cursors } from '../cursors.js';
import type { Collection, Store } from '../storage.js';

export interface ServerState {
  store: Store;
  cursors: Cursors;
  startedAt: Date;
  /** Runtime parameters a client may read and set (getParameter / setParameter). */
  parameters: { ttlMonitorSleepSecs: number };
  /** Called after setParameter changes ttlMonitorSleepSecs. */
  onTtlMonitorChange?: () => void;
  /** Let another connection's command run between an upsert's failed match and its insert, as MongoDB may. */
  interleaveUpserts: boolean;
  /** Unsorted finds, aggregates and single-document writes see the documents in a random order. */
  shuffleUnsorted: boolean;
}

export interface Request {
  state: ServerState;
  db: string;
  body: Doc;
  connectionId: number;
  remote: string;
  /** Size of the wire message that carried the command (when known): no document in it can be larger. */
  messageBytes?: number;
}

export type Handler = (req: Request) => Doc | Promise<Doc>;

/**
 * Fields every command may carry that do not change results on a
 * standalone in-memory server (sessions, read/write concern, timeouts, ...).
 */
const GENERIC_FIELDS = new Set([
  '$db',
  'lsid',
  '$readPreference',
  '$clusterTime',
  'writeConcern',
  'readConcern',
  'comment',
  'maxTimeMS',
  'apiVersion',
  'apiStrict',
  'apiDeprecationErrors',
  '$audit',
  '$client',
  'bypassDocumentValidation',
  'allowDiskUse',
  'noCursorTimeout',
  'allowPartialResults',
  'mayBypassWriteBlocking',
  '$queryOptions',
]);

/** Rejects unknown fields the way the server's IDL parser does. */
export function checkFields(body: Doc, allowed: readonly string[]): void {
  const [cmd, ...rest] = Object.keys(body);
  for (const k of rest) {
    if (GENERIC_FIELDS.has(k) || allowed.includes(k)) continue;
    fail('Location40415', `BSON field '${cmd}.${k}' is an unknown field.`);
  }
}

/** Known MongoDB options this stand-in does not implement: fail loudly, never ignore. */
export function rejectOptions(body: Doc, cmd: string, names: readonly string[]): void {
  for (const n of names) {
    if (body[n] !== undefined && body[n] !== false) notImplemented(`the '${n}' option of ${cmd}`);
  }
}

export function checkCollation(collation: unknown): void {
  if (collation === undefined) return;
  if (isPlainObject(collation) && collation.locale === 'simple') return;
  notImplemented('collation (only {locale: "simple"} is accepted)');
}

export function collectionName(body: Doc): string {
  const [cmd] = Object.keys(body);
  const name = cmd === undefined ? undefined : body[cmd];
  if (typeof name !== 'string') {
    fail('InvalidNamespace', `collection name has invalid type ${typeName(name)}`);
  }
  if (!name) fail('InvalidNamespace', `Invalid namespace specified '${name}'`);
  return name;
}

export function optionalInt(body: Doc, field: string, opts: { min?: number } = {}): number | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  const n = typeof v === 'number' ? v : isNumeric(v) ? Number(String(v)) : NaN;
  if (!Number.isFinite(n)) {
    fail(
      'TypeMismatch',
      `BSON field '${Object.keys(body)[0]}.${field}' is the wrong type '${typeName(v)}', expected types '[long, int, decimal, double]'`,
    );
  }
  if (opts.min !== undefined && n < opts.min) {
    fail('BadValue', `${field} must be >= ${opts.min}, got ${n}`);
  }
  return Math.trunc(n);
}

export function optionalDoc(body: Doc, field: string): Doc | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (!isPlainObject(v)) {
    fail(
      'TypeMismatch',
      `BSON field '${Object.keys(body)[0]}.${field}' is the wrong type '${typeName(v)}', expected type 'object'`,
    );
  }
  return v;
}

/**
 * A hint only picks a plan, so results are unaffected — except on sparse or
 * partial indexes, which would hide documents; those are rejected.
 */
export function checkHint(coll: Collection | undefined, hint: unknown): void {
  if (hint === undefined || hint === null || !coll) return;
  if (isPlainObject(hint) && Object.keys(hint).length === 1 && '$natural' in hint) return;
  const idx = coll.indexes.find((i) =>
    typeof hint === 'string' ? i.spec.name === hint : isPlainObject(hint) && keyOf(i.spec.key) === keyOf(hint),
  );
  if (!idx) fail('BadValue', `hint provided does not correspond to an existing index: ${formatValue(hint)}`);
  if (idx.spec.sparse || idx.spec.partialFilterExpression) notImplemented('hinting a sparse or partial index');
}

export function ns(db: string, coll: string): string {
  return `${db}.${coll}`;
}
