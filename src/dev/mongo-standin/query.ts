// Glue to mingo: filters, sorting, projection and aggregation. Semantics come
// from mingo; this file only validates input, rejects what the stand-in does
// not support, and adds a top-k sort so `sort + limit` stays cheap on big
// collections.

import { Aggregator, ProcessingMode, Query } from 'mingo';
import { Context } from 'mingo/core';
import * as queryOperators from 'mingo/operators/query';
import { Query as FilterQuery } from 'mingo/query';
import { compare, resolve } from 'mingo/util';
import { must } from '../../shared/must.js';
import { fail, notImplemented } from './errors.js';
import { type Doc, isPlainObject } from './values.js';
import type { Options } from 'mingo/types';

export const MINGO_OPTIONS: Partial<Options> = {
  idKey: '_id',
  scriptEnabled: false,
  useStrictMode: true,
  processingMode: ProcessingMode.CLONE_OFF,
};

export type Matcher = (doc: Doc) => boolean;

/**
 * Filters other than `$expr` need only the query operators. mingo's `Query` copies every operator it has
 * (expressions, stages, accumulators: some 200) into a fresh context per query; a filter compiled with this
 * context copies 27, which made compiling one about four times cheaper.
 */
const QUERY_OPERATORS_ONLY = Context.init({ query: queryOperators });

/** Whether the filter uses aggregation expressions (`$expr`), which need mingo's every operator. */
function usesExpressions(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(usesExpressions);
  if (!isPlainObject(value)) return false;
  return Object.entries(value).some(([key, v]) => key === '$expr' || usesExpressions(v));
}

function filterQuery(filter: Doc): Query | FilterQuery {
  return usesExpressions(filter)
    ? new Query(filter, MINGO_OPTIONS)
    : new FilterQuery(filter, { ...MINGO_OPTIONS, context: QUERY_OPERATORS_ONLY });
}

/** A top-level field name: no dots, no leading `$`, not all digits (JS would reorder such keys). */
export const TOP_LEVEL_FIELD = /^(?![0-9]+$)[^.$][^.]*$/;

const UNSUPPORTED_QUERY_OPS: Record<string, string> = {
  $where: '$where (server-side JavaScript)',
  $text: '$text (text search needs a text index)',
  $near: '$near (geospatial queries)',
  $nearSphere: '$nearSphere (geospatial queries)',
  $geoWithin: '$geoWithin (geospatial queries)',
  $geoIntersects: '$geoIntersects (geospatial queries)',
  $within: '$within (geospatial queries)',
  $jsonSchema: '$jsonSchema',
  $function: '$function (server-side JavaScript)',
  $accumulator: '$accumulator (server-side JavaScript)',
};

const RANGE_OPS = new Set(['$gt', '$gte', '$lt', '$lte']);

/**
 * Decimal128 and Longs beyond 2^53 are compared by mingo as strings, which
 * orders them wrongly; range queries and sorts on them are refused.
 */
function isWideNumber(v: unknown): boolean {
  const t = v !== null && typeof v === 'object' ? (v as { _bsontype?: string })._bsontype : undefined;
  return t === 'Decimal128' || t === 'Long';
}

/** Throws NotImplemented if the value uses any operator the stand-in rejects. */
export function rejectUnsupportedOperators(value: unknown): void {
  if (Array.isArray(value)) {
    for (const v of value) rejectUnsupportedOperators(v);
  } else if (isPlainObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      const unsupported = UNSUPPORTED_QUERY_OPS[k];
      if (unsupported !== undefined && Object.hasOwn(UNSUPPORTED_QUERY_OPS, k)) notImplemented(unsupported);
      if (RANGE_OPS.has(k) && isWideNumber(v)) notImplemented(`${k} with a Decimal128 or 64-bit integer operand`);
      rejectUnsupportedOperators(v);
    }
  }
}

export function compileFilter(filter: unknown, what = 'filter'): Matcher {
  if (filter === undefined || filter === null) return () => true;
  if (!isPlainObject(filter)) fail('TypeMismatch', `${what} must be an object`);
  if (Object.keys(filter).length === 0) return () => true;
  rejectUnsupportedOperators(filter);
  const equalities = scalarEqualities(filter);
  if (equalities) return scalarEqualityMatcher(filter, equalities);
  const query = filterQuery(filter);
  return (doc) => query.test(doc);
}

type ScalarOrNull = string | number | boolean | null;

/**
 * `{field: "text" | true | 12 | null, ...}` on top-level fields: most filters (`{_id, company_id}`, a live
 * record's `{..., archived_at: null}` and the like).
 */
function scalarEqualities(filter: Doc): Array<[string, ScalarOrNull]> | undefined {
  const pairs: Array<[string, ScalarOrNull]> = [];
  for (const [field, value] of Object.entries(filter)) {
    if (!TOP_LEVEL_FIELD.test(field)) return undefined;
    if (
      value !== null &&
      typeof value !== 'string' &&
      typeof value !== 'boolean' &&
      !(typeof value === 'number' && Number.isFinite(value))
    )
      return undefined;
    pairs.push([field, value]);
  }
  return pairs;
}

/**
 * Matches scalar equalities without mingo (which builds a whole operator context per query). `null` matches
 * a null or missing field, as on MongoDB. A stored value that is not a plain scalar (an array holding the
 * value, a Long equal to a number, ...) or a field holding `undefined` is left to mingo, compiled only then.
 */
function scalarEqualityMatcher(filter: Doc, equalities: Array<[string, ScalarOrNull]>): Matcher {
  let query: Query | FilterQuery | undefined;
  return (doc) => {
    for (const [field, expected] of equalities) {
      const actual = doc[field];
      if (actual === expected) continue;
      if (actual === undefined && !(field in doc)) {
        if (expected === null) continue;
        return false;
      }
      if (actual === undefined || (actual !== null && typeof actual === 'object')) {
        query ??= filterQuery(filter);
        return query.test(doc);
      }
      return false;
    }
    return true;
  };
}

export type SortSpec = Array<[string, 1 | -1]>;

/** Parses a sort document; `$natural` is returned as a direction on its own. */
export function parseSort(sort: unknown): { keys: SortSpec; natural?: 1 | -1 } | undefined {
  if (sort === undefined || sort === null) return undefined;
  if (!isPlainObject(sort)) fail('TypeMismatch', 'sort must be an object');
  const keys: SortSpec = [];
  let natural: 1 | -1 | undefined;
  for (const [k, v] of Object.entries(sort)) {
    if (isPlainObject(v)) notImplemented(`sort by ${JSON.stringify(v)}`);
    const dir = Number(v);
    if (dir !== 1 && dir !== -1)
      fail('BadValue', '$sort key ordering must be 1 (for ascending) or -1 (for descending)');
    if (k === '$natural') natural = dir;
    else keys.push([k, dir]);
  }
  if (keys.length === 0 && natural === undefined) return undefined;
  if (keys.length && natural !== undefined) notImplemented('mixing $natural with other sort keys');
  return { keys, natural };
}

type Decorated = { doc: Doc; key: unknown[] };

function comparator(spec: SortSpec) {
  return (a: Decorated, b: Decorated): number => {
    for (const [i, [, direction]] of spec.entries()) {
      const c = compare(a.key[i], b.key[i]);
      if (c !== 0) return c * direction;
    }
    return 0;
  };
}

/**
 * Stable sort with mingo's value ordering (missing sorts as null, as in
 * MongoDB). With `keep` set, only the first `keep` results are kept via a
 * bounded insertion buffer, so `sort + limit` over a big collection is O(n log k).
 */
export function sortDocs(docs: Doc[], sort: { keys: SortSpec; natural?: 1 | -1 }, keep?: number): Doc[] {
  if (!sort.keys.length) return sort.natural === -1 ? docs.slice().reverse() : docs;
  const decorate = (doc: Doc): Decorated => ({
    doc,
    key: sort.keys.map(([k]) => {
      const v = resolve(doc, k);
      if (isWideNumber(v)) notImplemented(`sorting on Decimal128 or 64-bit integers beyond 2^53 ('${k}')`);
      return v === undefined ? null : v;
    }),
  });
  const cmp = comparator(sort.keys);
  if (keep !== undefined && keep < docs.length / 4) {
    const buf: Decorated[] = [];
    for (const doc of docs) {
      const d = decorate(doc);
      const last = buf[keep - 1];
      if (buf.length === keep && (last === undefined || cmp(d, last) >= 0)) continue;
      let lo = 0;
      let hi = buf.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (cmp(must(buf[mid], 'an element between lo and hi'), d) <= 0) lo = mid + 1;
        else hi = mid;
      }
      buf.splice(lo, 0, d);
      if (buf.length > keep) buf.pop();
    }
    return buf.map((d) => d.doc);
  }
  return docs
    .map(decorate)
    .sort(cmp)
    .map((d) => d.doc);
}

export function projectDocs(docs: Doc[], projection: unknown, filter?: Doc): Doc[] {
  if (projection === undefined || projection === null) return docs;
  if (!isPlainObject(projection)) fail('TypeMismatch', 'projection must be an object');
  if (Object.keys(projection).length === 0) return docs;
  for (const v of Object.values(projection)) {
    if (isPlainObject(v) && '$meta' in v) notImplemented('$meta projections');
  }
  rejectUnsupportedOperators(projection);
  const topLevel = topLevelProjection(projection);
  if (topLevel) return docs.map(topLevel);
  // The positional projection (`a.$`) needs the query that selected the document.
  const positional = Object.keys(projection).some((k) => k.endsWith('.$'));
  const out = new Query(positional && filter ? filter : {}, MINGO_OPTIONS).find<Doc>(docs, projection).all();
  return out.length === docs.length
    ? out.map((d, i) => inSourceOrder(d, must(docs[i], 'a source document per projected one')))
    : out;
}

/**
 * Projections that only include or only exclude top-level fields (`{pending_events: 0}`, `{_id: 1}`,
 * ...), applied without mingo, which builds a whole operator context per call. Anything else
 * returns undefined and goes to mingo.
 */
function topLevelProjection(projection: Doc): ((doc: Doc) => Doc) | undefined {
  let including = false;
  let excluding = false;
  let showId = true;
  const fields = new Set<string>();
  for (const [field, value] of Object.entries(projection)) {
    if (value !== 0 && value !== 1 && value !== true && value !== false) return undefined;
    const shown = value === 1 || value === true;
    if (field === '_id') {
      showId = shown;
      continue;
    }
    if (!TOP_LEVEL_FIELD.test(field)) return undefined;
    if (shown) including = true;
    else excluding = true;
    fields.add(field);
  }
  // Mixed inclusion and exclusion (an explicit `_id: 1` among exclusions too) is mingo's to judge.
  if (including && excluding) return undefined;
  if (excluding && projection._id !== undefined && showId) return undefined;
  // Only `{_id: 1}` includes; only `{_id: 0}` excludes. Output keeps the stored field order.
  const keep =
    including || (!excluding && showId) ? (field: string) => fields.has(field) : (field: string) => !fields.has(field);
  return (doc) => {
    const out: Doc = {};
    for (const field of Object.keys(doc)) if (field === '_id' ? showId : keep(field)) out[field] = doc[field];
    return out;
  };
}

/** MongoDB keeps the stored field order (so `_id` first); mingo emits projection order. */
function inSourceOrder(projected: Doc, source: Doc): Doc {
  const ordered: Doc = {};
  for (const k of Object.keys(source)) if (Object.hasOwn(projected, k)) ordered[k] = projected[k];
  for (const k of Object.keys(projected)) if (!Object.hasOwn(ordered, k)) ordered[k] = projected[k];
  return ordered;
}

export interface FindSpec {
  filter?: Doc;
  sort?: unknown;
  skip?: number;
  limit?: number;
  projection?: unknown;
}

/** filter → sort → skip → limit → projection, like the find command. */
export function findDocs(source: Iterable<Doc>, spec: FindSpec): Doc[] {
  const match = compileFilter(spec.filter);
  const sort = parseSort(spec.sort);
  const skip = spec.skip ?? 0;
  const limit = spec.limit && spec.limit > 0 ? spec.limit : undefined;
  let out: Doc[] = [];
  if (!sort) {
    let skipped = 0;
    for (const doc of source) {
      if (!match(doc)) continue;
      if (skipped < skip) skipped++;
      else if (out.push(doc) === limit) break;
    }
  } else {
    for (const doc of source) if (match(doc)) out.push(doc);
    out = sortDocs(out, sort, limit !== undefined ? skip + limit : undefined);
    out = out.slice(skip, limit !== undefined ? skip + limit : undefined);
  }
  return projectDocs(out, spec.projection, spec.filter);
}

// Stages that never mutate their input documents, so the pipeline can run on
// stored documents without cloning them first.
const NON_MUTATING_STAGES = new Set(['$match', '$sort', '$limit', '$skip', '$count', '$group', '$sortByCount']);
const UNSUPPORTED_STAGES = new Set([
  '$out',
  '$merge',
  '$changeStream',
  '$currentOp',
  '$collStats',
  '$indexStats',
  '$listSessions',
  '$listLocalSessions',
  '$planCacheStats',
  '$search',
  '$searchMeta',
  '$vectorSearch',
  '$geoNear',
  '$listSearchIndexes',
  '$shardedDataDistribution',
  '$changeStreamSplitLargeEvent',
  '$queryStats',
]);

export function validatePipeline(pipeline: unknown): Doc[] {
  if (!Array.isArray(pipeline)) fail('TypeMismatch', "'pipeline' option must be specified as an array");
  for (const stage of pipeline) {
    if (!isPlainObject(stage) || Object.keys(stage).length !== 1) {
      fail('Location40324', 'A pipeline stage specification object must contain exactly one field.');
    }
    const name = must(Object.keys(stage)[0], 'the stage name checked above');
    if (UNSUPPORTED_STAGES.has(name)) notImplemented(`the ${name} aggregation stage`);
    rejectUnsupportedOperators(stage);
  }
  return pipeline as Doc[];
}

export function needsClone(pipeline: Doc[]): boolean {
  return pipeline.some((s) => !NON_MUTATING_STAGES.has(Object.keys(s)[0] ?? ''));
}

export function runPipeline(docs: Doc[], pipeline: Doc[], resolveCollection: (name: string) => Doc[]): Doc[] {
  try {
    const out = new Aggregator(pipeline, { ...MINGO_OPTIONS, collectionResolver: resolveCollection }).run<Doc>(docs);
    // MongoDB emits _id first from $project/$group; mingo may append it last.
    return out.map((d) => {
      if (!isPlainObject(d) || !Object.hasOwn(d, '_id') || Object.keys(d)[0] === '_id') return d;
      const { _id, ...rest } = d;
      return { _id, ...rest };
    });
  } catch (e) {
    const m = /unregistered pipeline operator (\$\w+)/.exec(e instanceof Error ? e.message : '');
    if (m) fail('Location40324', `Unrecognized pipeline stage name: '${m[1]}'`);
    throw e;
  }
}
