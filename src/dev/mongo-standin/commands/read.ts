// Read commands: find, getMore, killCursors, count, distinct, aggregate.

import { compare } from 'mingo/util';
import { fail, notImplemented } from '../errors.js';
import { compileFilter, findDocs, needsClone, parseSort, runPipeline, validatePipeline } from '../query.js';
import {
  clone,
  type Doc,
  EMPTY_ARRAY,
  isNumeric,
  isPlainObject,
  keyOf,
  MISSING,
  pathValues,
  shuffled,
} from '../values.js';
import {
  checkCollation,
  checkFields,
  checkHint,
  collectionName,
  type Handler,
  ns,
  optionalDoc,
  optionalInt,
  rejectOptions,
} from './common.js';
import type { Long } from 'bson';

const FIND_FIELDS = [
  'filter',
  'sort',
  'projection',
  'skip',
  'limit',
  'batchSize',
  'singleBatch',
  'hint',
  'collation',
  'let',
  'min',
  'max',
  'returnKey',
  'showRecordId',
  'tailable',
  'awaitData',
  'oplogReplay',
  'readOnce',
  'allowSpeculativeMajorityRead',
  'term',
];

export const find: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  checkFields(body, FIND_FIELDS);
  rejectOptions(body, 'find', [
    'let',
    'min',
    'max',
    'returnKey',
    'showRecordId',
    'tailable',
    'awaitData',
    'oplogReplay',
  ]);
  checkCollation(body.collation);
  const filter = optionalDoc(body, 'filter');
  const skip = optionalInt(body, 'skip', { min: 0 });
  const batchSize = optionalInt(body, 'batchSize', { min: 0 });
  let limit = optionalInt(body, 'limit');
  let singleBatch = !!body.singleBatch;
  if (limit !== undefined && limit < 0) {
    // Legacy negative limit: return at most |limit| documents in one batch.
    limit = -limit;
    singleBatch = true;
  }
  const coll = state.store.get(db, name);
  checkHint(coll, body.hint);
  const candidates = coll ? coll.candidates(filter) : [];
  const unordered = state.shuffleUnsorted && !parseSort(body.sort);
  const docs = findDocs(unordered ? shuffled(candidates) : candidates, {
    filter,
    sort: body.sort,
    skip,
    limit,
    projection: body.projection,
  });
  const first = singleBatch && limit ? Math.min(limit, batchSize ?? limit) : batchSize;
  return state.cursors.start(ns(db, name), docs, first, singleBatch);
};

export const getMore: Handler = ({ state, db, body }) => {
  checkFields(body, ['collection', 'batchSize', 'term', 'lastKnownCommittedOpTime']);
  if (!isNumeric(body.getMore)) {
    fail('TypeMismatch', "BSON field 'getMore.getMore' is the wrong type, expected type 'long'");
  }
  if (typeof body.collection !== 'string') {
    fail('TypeMismatch', "BSON field 'getMore.collection' is missing or the wrong type, expected type 'string'");
  }
  const batchSize = optionalInt(body, 'batchSize', { min: 0 });
  return state.cursors.getMore(body.getMore, ns(db, body.collection), batchSize);
};

export const killCursors: Handler = ({ state, body }) => {
  checkFields(body, ['cursors']);
  if (!Array.isArray(body.cursors))
    fail('TypeMismatch', "BSON field 'killCursors.cursors' is missing or the wrong type");
  const { cursorsKilled, cursorsNotFound } = state.cursors.kill(body.cursors);
  return { cursorsKilled, cursorsNotFound, cursorsAlive: [] as Long[], cursorsUnknown: [] as Long[], ok: 1 };
};

export const count: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  checkFields(body, ['query', 'limit', 'skip', 'hint', 'collation', 'fields']);
  checkCollation(body.collation);
  const query = optionalDoc(body, 'query');
  const skip = optionalInt(body, 'skip', { min: 0 }) ?? 0;
  const limit = Math.abs(optionalInt(body, 'limit') ?? 0);
  const coll = state.store.get(db, name);
  checkHint(coll, body.hint);
  let n: number;
  if (!query || Object.keys(query).length === 0) {
    n = Math.max(0, (coll?.docs.size ?? 0) - skip); // estimatedDocumentCount path
    if (limit) n = Math.min(n, limit);
  } else {
    n = findDocs(coll ? coll.candidates(query) : [], { filter: query, skip, limit }).length;
  }
  return { n, ok: 1 };
};

export const distinct: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  // No `hint`: distinct takes one from MongoDB 7.1 on, and this stand-in answers as 7.0.
  checkFields(body, ['key', 'query', 'collation']);
  checkCollation(body.collation);
  if (typeof body.key !== 'string')
    fail('TypeMismatch', "BSON field 'distinct.key' is missing or the wrong type, expected type 'string'");
  const query = optionalDoc(body, 'query');
  const coll = state.store.get(db, name);
  const seen = new Map<string, unknown>();
  for (const doc of findDocs(coll ? coll.candidates(query) : [], { filter: query })) {
    for (const v of pathValues(doc, body.key)) {
      if (v === MISSING || v === EMPTY_ARRAY) continue;
      const k = keyOf(v);
      if (!seen.has(k)) seen.set(k, v);
    }
  }
  return { values: [...seen.values()].sort(compare), ok: 1 };
};

export const aggregate: Handler = ({ state, db, body }) => {
  checkFields(body, ['pipeline', 'cursor', 'explain', 'collation', 'hint', 'let', 'fromMongos', 'needsMerge']);
  rejectOptions(body, 'aggregate', ['explain', 'let']);
  checkCollation(body.collation);
  const cursor = optionalDoc(body, 'cursor');
  if (!cursor) fail('FailedToParse', "The 'cursor' option is required, except for aggregate with the explain argument");
  const pipeline = validatePipeline(body.pipeline);
  const target = body.aggregate;
  let source: Doc[] = [];
  let namespace = `${db}.$cmd.aggregate`;
  if (target === 1) {
    if (Object.keys(pipeline[0] ?? {})[0] !== '$documents')
      notImplemented('database-level aggregate without $documents');
  } else if (typeof target === 'string') {
    namespace = ns(db, target);
    const coll = state.store.get(db, target);
    checkHint(coll, body.hint);
    if (coll) {
      // A leading $match can use the _id / index fast path.
      const first = pipeline[0]?.$match;
      const candidates = coll.candidates(isPlainObject(first) ? first : undefined);
      // Stages after a $sort see its order; before one, and without one, MongoDB promises none.
      source = state.shuffleUnsorted ? shuffled(candidates) : [...candidates];
      if (isPlainObject(first)) compileFilter(first); // validate early for a clear error
    }
  } else {
    fail('InvalidNamespace', 'collection name has invalid type, expected string or 1');
  }
  const input = needsClone(pipeline) ? source.map(clone) : source;
  const results = runPipeline(input, pipeline, (name) =>
    [...(state.store.get(db, name)?.docs.values() ?? [])].map(clone),
  );
  const batchSize = optionalInt(cursor, 'batchSize', { min: 0 });
  return state.cursors.start(namespace, results, batchSize);
};
