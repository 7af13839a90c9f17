// Update application on top of mingo's update operators. Adds what mingo
// lacks or does silently differently from MongoDB: $setOnInsert, type errors
// instead of silent no-ops, the immutable _id, and upsert seeding from the
// query's equality fields.

import { Aggregator, updateOne as mingoUpdateOne } from 'mingo';
import { fail, notImplemented } from './errors.js';
import { MINGO_OPTIONS, rejectUnsupportedOperators, TOP_LEVEL_FIELD } from './query.js';
import {
  clone,
  type Doc,
  formatValue,
  getPath,
  isNumeric,
  isPlainObject,
  keyOf,
  topField,
  typeName,
} from './values.js';

const OPERATORS = new Set([
  '$set',
  '$unset',
  '$inc',
  '$mul',
  '$min',
  '$max',
  '$push',
  '$addToSet',
  '$pull',
  '$pullAll',
  '$pop',
  '$rename',
  '$currentDate',
  '$bit',
  '$setOnInsert',
]);
const PIPELINE_STAGES = new Set(['$addFields', '$set', '$project', '$unset', '$replaceRoot', '$replaceWith']);

export type UpdateSpec =
  { kind: 'operators'; ops: Doc } | { kind: 'replacement'; doc: Doc } | { kind: 'pipeline'; stages: Doc[] };

export function parseUpdate(u: unknown): UpdateSpec {
  if (Array.isArray(u)) {
    for (const stage of u) {
      const name = isPlainObject(stage) ? Object.keys(stage)[0] : undefined;
      if (!name || !PIPELINE_STAGES.has(name)) {
        fail('Location40324', `Unrecognized pipeline stage name for an update: '${name}'`);
      }
    }
    rejectUnsupportedOperators(u);
    return { kind: 'pipeline', stages: u as Doc[] };
  }
  if (!isPlainObject(u)) fail('FailedToParse', 'Update argument must be either an object or an array');
  const keys = Object.keys(u);
  if (!keys[0]?.startsWith('$')) {
    const bad = keys.find((k) => k.startsWith('$'));
    if (bad)
      fail(
        'BadValue',
        `The dollar ($) prefixed field '${bad}' in '${bad}' is not allowed in the context of an update's replacement document.`,
      );
    return { kind: 'replacement', doc: u };
  }
  for (const op of keys) {
    if (!OPERATORS.has(op)) {
      fail(
        'FailedToParse',
        `Unknown modifier: ${op}. Expected a valid update modifier or pipeline-style update specified as an array`,
      );
    }
    if (!isPlainObject(u[op])) {
      fail(
        'FailedToParse',
        `Modifiers operate on fields but we found type ${typeName(u[op])} instead. For example: {$mod: {<field>: ...}} not {${op}: ${formatValue(u[op])}}`,
      );
    }
  }
  rejectUnsupportedOperators(u);
  return { kind: 'operators', ops: u };
}

/**
 * The top-level fields an update may change, or undefined when it may change any (a replacement or
 * a pipeline). Lets storage leave alone the indexes an update cannot affect, as MongoDB does.
 */
export function touchedFields(spec: UpdateSpec): Set<string> | undefined {
  if (spec.kind !== 'operators') return undefined;
  const fields = new Set<string>();
  for (const [op, paths] of Object.entries(spec.ops)) {
    for (const [path, value] of Object.entries(paths as Doc)) {
      fields.add(topField(path));
      if (op === '$rename' && typeof value === 'string') fields.add(topField(value));
    }
  }
  return fields;
}

export interface ApplyOptions {
  arrayFilters?: Doc[];
  /** The query that selected the document (needed for the positional `$`). */
  filter?: Doc;
  /** True when the document is being created by an upsert. */
  inserting?: boolean;
}

/** Returns the updated copy of `doc`; the stored document is never mutated. */
export function applyUpdate(doc: Doc, spec: UpdateSpec, opts: ApplyOptions = {}): { doc: Doc; modified: boolean } {
  if (spec.kind === 'replacement') {
    const { _id, ...rest } = clone(spec.doc);
    if (_id !== undefined && doc._id !== undefined && keyOf(_id) !== keyOf(doc._id)) {
      fail(
        'ImmutableField',
        `After applying the update, the (immutable) field '_id' was found to have been altered to _id: ${formatValue(_id)}`,
      );
    }
    const next = { _id: doc._id ?? _id, ...rest };
    if (next._id === undefined) delete next._id;
    return { doc: next, modified: keyOf(next) !== keyOf(doc) };
  }
  const next = clone(doc);
  if (spec.kind === 'pipeline') {
    // The pipeline's output is the new document; an _id it leaves out is kept, as MongoDB does.
    const [out] = new Aggregator(spec.stages, MINGO_OPTIONS).run<Doc>([next]);
    if (!isPlainObject(out)) fail('BadValue', 'an update pipeline must produce a document');
    const { _id, ...rest } = out;
    const result: Doc = _id === undefined && doc._id !== undefined ? { _id: doc._id, ...rest } : { _id, ...rest };
    if (result._id === undefined) delete result._id;
    checkIdUnchanged(doc, result);
    return { doc: result, modified: keyOf(result) !== keyOf(doc) };
  }
  const ops: Doc = { ...spec.ops };
  const onInsert = ops.$setOnInsert as Doc | undefined;
  delete ops.$setOnInsert;
  checkPaths(next, ops, !!opts.inserting);
  let modified = false;
  if (Object.keys(ops).length) modified = run(next, ops, opts);
  if (opts.inserting && onInsert && Object.keys(onInsert).length) {
    const soi: Doc = { $set: onInsert };
    checkPaths(next, soi, true);
    modified = run(next, soi, {}) || modified;
  }
  checkIdUnchanged(doc, next);
  return { doc: next, modified };
}

function run(target: Doc, ops: Doc, opts: ApplyOptions): boolean {
  const positional = Object.values(ops).some((fields) =>
    Object.keys(fields as Doc).some((p) => /(^|\.)\$(\.|$)/.test(p)),
  );
  if (positional && opts.inserting) {
    fail('BadValue', 'The positional operator did not find the match needed from the query.');
  }
  if (!positional && !opts.arrayFilters) {
    const modified = runCommonUpdate(target, ops);
    if (modified !== undefined) return modified;
  }
  const res = mingoUpdateOne(
    [target],
    positional && opts.filter ? opts.filter : {},
    ops,
    { arrayFilters: opts.arrayFilters, cloneMode: 'copy' },
    MINGO_OPTIONS,
  );
  return res.modifiedCount > 0;
}

const COMMON_OPERATORS = new Set(['$set', '$unset', '$inc', '$push']);

function isCommonPush(value: unknown): value is { $each: unknown[]; $slice?: number } {
  if (!isPlainObject(value) || !Array.isArray(value.$each)) return false;
  const slice = value.$slice;
  return (
    Object.keys(value).every((k) => k === '$each' || k === '$slice') && (slice === undefined || Number.isInteger(slice))
  );
}

/**
 * The updates almost every write makes ($set, $unset, $inc of plain numbers, $push of `$each` with an
 * optional `$slice`, on top-level fields), applied directly: mingo builds a whole operator context on
 * every call, which was most of the stand-in's time per write. Anything else (dotted paths, other
 * operators or modifiers, a path named twice) returns undefined and goes to mingo, untouched.
 */
function runCommonUpdate(target: Doc, ops: Doc): boolean | undefined {
  const seen = new Set<string>();
  for (const [op, fields] of Object.entries(ops)) {
    if (!COMMON_OPERATORS.has(op)) return undefined;
    for (const [path, value] of Object.entries(fields as Doc)) {
      if (!TOP_LEVEL_FIELD.test(path) || seen.has(path)) return undefined;
      seen.add(path);
      const current = target[path];
      if (op === '$inc' && (typeof value !== 'number' || (current !== undefined && typeof current !== 'number')))
        return undefined;
      if (op === '$push' && (!isCommonPush(value) || (current !== undefined && !Array.isArray(current))))
        return undefined;
    }
  }
  let modified = false;
  for (const [op, fields] of Object.entries(ops)) {
    for (const [path, value] of Object.entries(fields as Doc)) {
      const present = Object.hasOwn(target, path);
      const current = target[path];
      if (op === '$set') {
        if (present && keyOf(current) === keyOf(value)) continue;
        target[path] = clone(value);
      } else if (op === '$unset') {
        if (!present) continue;
        delete target[path];
      } else if (op === '$inc') {
        if (present && value === 0) continue;
        target[path] = ((current as number | undefined) ?? 0) + (value as number);
      } else {
        const { $each, $slice } = value as { $each: unknown[]; $slice?: number };
        let next = [...((current as unknown[] | undefined) ?? []), ...$each.map(clone)];
        if ($slice !== undefined)
          next = $slice >= 0 ? next.slice(0, $slice) : next.slice(Math.max(0, next.length + $slice));
        if (present && keyOf(next) === keyOf(current)) continue;
        target[path] = next;
      }
      modified = true;
    }
  }
  return modified;
}

function checkIdUnchanged(before: Doc, after: Doc): void {
  if (before._id !== undefined && keyOf(after._id) !== keyOf(before._id)) {
    fail('ImmutableField', "Performing an update on the path '_id' would modify the immutable field '_id'");
  }
}

/**
 * MongoDB errors where mingo silently does nothing (wrong types, paths
 * through scalars); also moves an explicit `_id` into a document being upserted.
 */
function checkPaths(doc: Doc, ops: Doc, inserting: boolean): void {
  for (const op of Object.keys(ops)) {
    const fields = (ops[op] = { ...ops[op] }); // copy: _id handling below may drop entries
    for (const path of Object.keys(fields as Doc)) {
      const value = (fields as Doc)[path];
      if (path === '_id' || path.startsWith('_id.')) {
        // Setting _id is allowed when creating the document or when it is a no-op.
        if (
          (op === '$set' || op === '$setOnInsert') &&
          path === '_id' &&
          (inserting || keyOf(value) === keyOf(doc._id))
        ) {
          if (inserting) doc._id = clone(value);
          delete (fields as Doc)[path];
          continue;
        }
        fail('ImmutableField', `Performing an update on the path '${path}' would modify the immutable field '_id'`);
      }
      if (/(^|\.)\$/.test(path) || op === '$unset') continue;
      checkTraversable(doc, path);
      const current = getPath(doc, path);
      const idText = `{_id: ${formatValue(doc._id)}}`;
      switch (op) {
        case '$inc':
        case '$mul':
          if (!isNumeric(value))
            fail(
              'TypeMismatch',
              `Cannot ${op === '$inc' ? 'increment' : 'multiply'} with non-numeric argument: {${path}: ${formatValue(value)}}`,
            );
          // null is not a number to MongoDB: $inc/$mul on it fail (code 14) instead of starting from 0.
          if (current !== undefined && !isNumeric(current)) {
            fail(
              'TypeMismatch',
              `Cannot apply ${op} to a value of non-numeric type. ${idText} has the field '${path.split('.').pop()}' of non-numeric type ${typeName(current)}`,
            );
          }
          // mingo's arithmetic only knows JS numbers; Decimal128 / huge Long would come out wrong.
          if (typeof value !== 'number' || (current !== undefined && current !== null && typeof current !== 'number')) {
            notImplemented(`${op} on Decimal128 or 64-bit integers beyond 2^53`);
          }
          break;
        case '$push':
        case '$addToSet':
          if (current !== undefined && !Array.isArray(current)) {
            fail(
              'BadValue',
              `The field '${path}' must be an array but is of type ${typeName(current)} in document ${idText}`,
            );
          }
          // mingo ignores $slice/$sort when the array does not exist yet.
          if (current === undefined && op === '$push' && isPlainObject(value) && '$each' in value)
            setPath(doc, path, []);
          break;
        case '$pull':
        case '$pullAll':
        case '$pop':
          if (current !== undefined && current !== null && !Array.isArray(current)) {
            fail(
              'BadValue',
              op === '$pop'
                ? `Path '${path}' contains an element of non-array type '${typeName(current)}'`
                : `Cannot apply ${op} to a non-array value`,
            );
          }
          break;
        case '$rename':
          if (typeof value !== 'string')
            fail('BadValue', `The 'to' field for $rename must be a string: ${path}: ${formatValue(value)}`);
          checkTraversable(doc, value);
          break;
      }
    }
  }
}

function checkTraversable(doc: Doc, path: string): void {
  const parts = path.split('.');
  let cur: unknown = doc;
  for (let i = 0; i < parts.length - 1; i++) {
    const part = parts[i] ?? '';
    let next: unknown;
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(part)) {
        fail('PathNotViable', `Cannot create field '${part}' in element {${parts[i - 1]}: ${formatValue(cur)}}`);
      }
      next = cur[Number(part)];
    } else if (isPlainObject(cur)) {
      next = Object.hasOwn(cur, part) ? cur[part] : undefined;
    } else {
      fail('PathNotViable', `Cannot create field '${part}' in element {${parts[i - 1]}: ${formatValue(cur)}}`);
    }
    if (next === undefined) return;
    cur = next;
  }
  const last = parts.at(-1) ?? '';
  const viable = isPlainObject(cur) || (Array.isArray(cur) && /^\d+$/.test(last));
  if (!viable) {
    fail('PathNotViable', `Cannot create field '${last}' in element {${parts.at(-2) ?? ''}: ${formatValue(cur)}}`);
  }
}

function setPath(doc: Doc, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur: Doc = doc;
  for (const part of parts.slice(0, -1)) {
    if (!isPlainObject(cur[part]) && !Array.isArray(cur[part])) cur[part] = {};
    cur = cur[part];
  }
  cur[parts.at(-1) ?? ''] = value;
}

/**
 * Upsert seed: the equality fields of the query (top level and inside $and),
 * as MongoDB does before applying the update to the new document.
 */
export function upsertSeed(filter: Doc | undefined): Doc {
  const seed: Doc = {};
  const visit = (f: Doc): void => {
    for (const [k, v] of Object.entries(f)) {
      if (k === '$and' && Array.isArray(v)) v.forEach((sub) => isPlainObject(sub) && visit(sub));
      if (k.startsWith('$')) continue;
      if (isPlainObject(v) && Object.keys(v).some((op) => op.startsWith('$'))) {
        if ('$eq' in v) setPath(seed, k, clone(v.$eq));
        else if (Array.isArray(v.$in) && v.$in.length === 1) setPath(seed, k, clone(v.$in[0]));
      } else if (!(v instanceof RegExp)) {
        setPath(seed, k, clone(v));
      }
    }
  };
  if (filter) visit(filter);
  return seed;
}
