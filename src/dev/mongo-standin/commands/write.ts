// Write commands: insert, update, delete, findAndModify. Each command runs from
// start to finish without yielding to the event loop, so a read-modify-write such
// as findAndModify is atomic with respect to every other connection. The one
// exception is opt-in (interleaveUpserts): an upsert that matched nothing lets
// other connections run before it inserts, as MongoDB may.

import { asCommandError, CommandError, fail } from '../errors.js';
import { compileFilter, parseSort, projectDocs, sortDocs } from '../query.js';
import { checkDocumentSize, type Collection, MAX_DOCUMENT_BYTES } from '../storage.js';
import { applyUpdate, parseUpdate, touchedFields, upsertSeed, type UpdateSpec } from '../updates.js';
import { type Doc, isPlainObject, keyOf, shuffled, topField } from '../values.js';
import {
  checkCollation,
  checkFields,
  checkHint,
  collectionName,
  type Handler,
  optionalDoc,
  type Request,
  rejectOptions,
} from './common.js';

const MAX_WRITE_BATCH = 100_000;

function statements(body: Doc, field: string): Doc[] {
  const list = body[field];
  if (!Array.isArray(list))
    fail(
      'TypeMismatch',
      `BSON field '${Object.keys(body)[0]}.${field}' is missing or the wrong type, expected type 'array'`,
    );
  if (list.length > MAX_WRITE_BATCH)
    fail(
      'InvalidOptions',
      `Write batch sizes must be between 1 and ${MAX_WRITE_BATCH}. Got ${list.length} operations.`,
    );
  return list;
}

/** Runs statements with ordered/unordered semantics, collecting writeErrors. */
function eachStatement(body: Doc, list: unknown[], run: (stmt: unknown, index: number) => void): Doc[] {
  const ordered = body.ordered !== false;
  const writeErrors: Doc[] = [];
  for (let i = 0; i < list.length; i++) {
    try {
      run(list[i], i);
    } catch (e) {
      writeErrors.push(asCommandError(e).toWriteError(i));
      if (ordered) break;
    }
  }
  return writeErrors;
}

/** eachStatement for statements that may wait (an interleaved upsert). */
async function eachStatementAsync(
  body: Doc,
  list: unknown[],
  run: (stmt: unknown, index: number) => Promise<void>,
): Promise<Doc[]> {
  const ordered = body.ordered !== false;
  const writeErrors: Doc[] = [];
  for (let i = 0; i < list.length; i++) {
    try {
      await run(list[i], i);
    } catch (e) {
      writeErrors.push(asCommandError(e).toWriteError(i));
      if (ordered) break;
    }
  }
  return writeErrors;
}

function withErrors(reply: Doc, writeErrors: Doc[]): Doc {
  if (writeErrors.length) reply.writeErrors = writeErrors;
  return { ...reply, ok: 1 };
}

export const insert: Handler = ({ state, db, body, messageBytes }) => {
  const name = collectionName(body);
  checkFields(body, ['documents', 'ordered']);
  const docs = statements(body, 'documents');
  const coll = state.store.ensure(db, name);
  let n = 0;
  const errors = eachStatement(body, docs, (doc) => {
    if (!isPlainObject(doc)) fail('TypeMismatch', 'each insert document must be an object');
    // A document of a message within the limit is within it too: measuring each one would be wasted work.
    if (messageBytes === undefined || messageBytes > MAX_DOCUMENT_BYTES) checkDocumentSize(doc, 'insert');
    coll.insert(doc); // freshly decoded from the wire, so nobody else holds a reference
    n++;
  });
  return withErrors({ n }, errors);
};

interface WriteResult {
  n: number;
  nModified: number;
  upsertedId?: unknown;
  before?: Doc;
  after?: Doc;
}

interface UpdateOptions {
  multi: boolean;
  upsert: boolean;
  arrayFilters?: Doc[];
  sort?: unknown;
  /** Running counts, kept even when a later document of a multi-update fails. */
  tally?: { n: number; nModified: number };
  /** Set on the one retry of an upsert that lost an insert race. */
  retried?: boolean;
}

/** The core of update and findAndModify: match, apply, enforce indexes, or upsert. */
async function updateMatching(
  req: Request,
  name: string,
  filter: Doc | undefined,
  spec: UpdateSpec,
  opts: UpdateOptions,
): Promise<WriteResult> {
  const { store } = req.state;
  const coll = store.get(req.db, name);
  const targets = matching(coll, filter, opts.multi, opts.sort, req.state.shuffleUnsorted);
  if (targets.length === 0) {
    if (!opts.upsert) return { n: 0, nModified: 0 };
    if (!req.state.interleaveUpserts) return upsert(req, name, filter, spec, opts);
    // Another connection's command may run between the failed match and the insert, as on MongoDB.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      return upsert(req, name, filter, spec, opts);
    } catch (e) {
      if (opts.retried || !serverRetriesUpsert(e, filter, spec)) throw e;
      return updateMatching(req, name, filter, spec, { ...opts, retried: true });
    }
  }
  if (spec.kind === 'replacement' && opts.multi) {
    fail('FailedToParse', 'multi update is not supported for replacement-style update');
  }
  const tally = opts.tally ?? { n: 0, nModified: 0 };
  let nModified = 0;
  let after: Doc | undefined;
  const touched = touchedFields(spec);
  for (const doc of targets) {
    const res = applyUpdate(doc, spec, { filter, arrayFilters: opts.arrayFilters });
    after = res.doc;
    if (res.modified) {
      checkDocumentSize(res.doc, 'update');
      coll!.replace(keyOf(doc._id), res.doc, touched);
      nModified++;
      tally.nModified++;
    }
    tally.n++;
  }
  return { n: targets.length, nModified, before: targets[0], after };
}

function upsert(
  req: Request,
  name: string,
  filter: Doc | undefined,
  spec: UpdateSpec,
  opts: UpdateOptions,
): WriteResult {
  const seed = upsertSeed(filter);
  const base = spec.kind === 'operators' ? seed : seed._id !== undefined ? { _id: seed._id } : {};
  const { doc } = applyUpdate(base, spec, { inserting: true, arrayFilters: opts.arrayFilters });
  checkDocumentSize(doc, 'update');
  const inserted = req.state.store.ensure(req.db, name).insert(doc);
  return { n: 1, nModified: 0, upsertedId: inserted._id, after: inserted };
}

/**
 * Whether MongoDB (4.2+) retries an upsert that lost an insert race on a unique index itself: its filter is equality on
 * exactly the fields of that index, and the update does not change them. Otherwise the client sees E11000.
 */
function serverRetriesUpsert(error: unknown, filter: Doc | undefined, spec: UpdateSpec): boolean {
  if (!(error instanceof CommandError) || error.codeName !== 'DuplicateKey' || !filter) return false;
  const indexFields = Object.keys(error.extra.keyPattern ?? {});
  const filterFields = Object.keys(filter);
  const equality = (v: unknown) =>
    !isPlainObject(v) || Object.keys(v).every((k) => !k.startsWith('$')) || Object.keys(v).join() === '$eq';
  if (filterFields.length !== indexFields.length || !filterFields.every((f) => indexFields.includes(f))) return false;
  if (!filterFields.every((f) => equality(filter[f]))) return false;
  const touched = touchedFields(spec);
  return touched !== undefined && !filterFields.some((f) => touched.has(topField(f)));
}

function matching(
  coll: Collection | undefined,
  filter: Doc | undefined,
  multi: boolean,
  sort: unknown,
  shuffle = false,
): Doc[] {
  const match = compileFilter(filter);
  const parsedSort = parseSort(sort);
  const out: Doc[] = [];
  if (!coll) return out;
  // Which of several matching documents a single-document write takes is unspecified without a sort.
  const candidates = shuffle && !multi && !parsedSort ? shuffled(coll.candidates(filter)) : coll.candidates(filter);
  for (const doc of candidates) {
    if (!match(doc)) continue;
    out.push(doc);
    if (!multi && !parsedSort) break;
  }
  return parsedSort && !multi ? sortDocs(out, parsedSort, 1).slice(0, 1) : out;
}

const UPDATE_STMT_FIELDS = ['q', 'u', 'upsert', 'multi', 'arrayFilters', 'hint', 'collation', 'c', 'upsertSupplied'];

export const update: Handler = async (req) => {
  const { body } = req;
  const name = collectionName(body);
  checkFields(body, ['updates', 'ordered', 'let']);
  rejectOptions(body, 'update', ['let']);
  const list = statements(body, 'updates');
  let n = 0;
  let nModified = 0;
  const upserted: Doc[] = [];
  const errors = await eachStatementAsync(body, list, async (raw, index) => {
    if (!isPlainObject(raw)) fail('TypeMismatch', 'each update statement must be an object');
    // `sort` is not among them: an update's sort came with MongoDB 8.0, and this stand-in answers as 7.0.
    checkFields({ 'update.updates': 1, ...raw }, UPDATE_STMT_FIELDS);
    rejectOptions(raw, 'update', ['c']);
    checkCollation(raw.collation);
    checkHint(req.state.store.get(req.db, name), raw.hint);
    const filter = optionalDoc(raw, 'q') ?? {};
    const tally = { n: 0, nModified: 0 };
    try {
      const res = await updateMatching(req, name, filter, parseUpdate(raw.u), {
        multi: !!raw.multi,
        upsert: !!raw.upsert,
        arrayFilters: arrayFilters(raw.arrayFilters),
        tally,
      });
      if (res.upsertedId !== undefined) {
        tally.n++;
        upserted.push({ index, _id: res.upsertedId });
      }
    } finally {
      n += tally.n;
      nModified += tally.nModified;
    }
  });
  const reply: Doc = { n, nModified };
  if (upserted.length) reply.upserted = upserted;
  return withErrors(reply, errors);
};

function arrayFilters(v: unknown): Doc[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every(isPlainObject)) fail('TypeMismatch', 'arrayFilters must be an array of objects');
  v.forEach((f) => compileFilter(f, 'arrayFilters entry'));
  return v;
}

export const del: Handler = (req) => {
  const { state, db, body } = req;
  const name = collectionName(body);
  checkFields(body, ['deletes', 'ordered', 'let']);
  rejectOptions(body, 'delete', ['let']);
  const list = statements(body, 'deletes');
  let n = 0;
  const errors = eachStatement(body, list, (raw) => {
    if (!isPlainObject(raw)) fail('TypeMismatch', 'each delete statement must be an object');
    checkFields({ 'delete.deletes': 1, ...raw }, ['q', 'limit', 'hint', 'collation']);
    checkCollation(raw.collation);
    const limit = Number(raw.limit ?? 0);
    if (limit !== 0 && limit !== 1)
      fail('FailedToParse', `The limit field in delete objects must be 0 or 1. Got ${raw.limit}`);
    const coll = state.store.get(db, name);
    checkHint(coll, raw.hint);
    for (const doc of matching(coll, optionalDoc(raw, 'q') ?? {}, limit === 0, undefined, state.shuffleUnsorted)) {
      if (coll!.remove(keyOf(doc._id))) n++;
    }
  });
  return withErrors({ n }, errors);
};

export const findAndModify: Handler = async (req) => {
  const { state, db, body } = req;
  const name = collectionName(body);
  checkFields(body, [
    'query',
    'sort',
    'remove',
    'update',
    'new',
    'fields',
    'upsert',
    'arrayFilters',
    'hint',
    'collation',
    'let',
  ]);
  rejectOptions(body, 'findAndModify', ['let']);
  checkCollation(body.collation);
  const filter = optionalDoc(body, 'query') ?? {};
  const fields = optionalDoc(body, 'fields');
  const remove = !!body.remove;
  if (remove && body.update !== undefined) fail('FailedToParse', 'Cannot specify both an update and remove=true');
  if (!remove && body.update === undefined) fail('FailedToParse', 'Either an update or remove=true must be specified');
  if (remove && body.upsert) fail('FailedToParse', 'Cannot specify both upsert=true and remove=true ');
  if (remove && body.new) {
    fail('FailedToParse', "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document");
  }
  checkHint(state.store.get(db, name), body.hint);
  const shape = (doc: Doc | undefined): Doc | null => (doc ? (projectDocs([doc], fields, filter)[0] ?? null) : null);
  if (remove) {
    const coll = state.store.get(db, name);
    const [doc] = matching(coll, filter, false, body.sort, state.shuffleUnsorted);
    if (doc) coll!.remove(keyOf(doc._id));
    return { lastErrorObject: { n: doc ? 1 : 0 }, value: shape(doc), ok: 1 };
  }
  const res = await updateMatching(req, name, filter, parseUpdate(body.update), {
    multi: false,
    upsert: !!body.upsert,
    arrayFilters: arrayFilters(body.arrayFilters),
    sort: body.sort,
  });
  const lastErrorObject: Doc = { n: res.n, updatedExisting: res.n > 0 && res.upsertedId === undefined };
  if (res.upsertedId !== undefined) lastErrorObject.upserted = res.upsertedId;
  return { lastErrorObject, value: shape(body.new ? res.after : res.before), ok: 1 };
};
