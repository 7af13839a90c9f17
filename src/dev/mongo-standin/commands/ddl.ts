// Collections and indexes: create, drop, listCollections, createIndexes,
// listIndexes, dropIndexes.

import { fail, notImplemented } from '../errors.js';
import { type IndexSpec, normaliseSpec } from '../indexes.js';
import { compileFilter } from '../query.js';
import { type Doc, formatValue, isPlainObject, keyOf } from '../values.js';
import { checkFields, collectionName, type Handler, ns, optionalDoc, optionalInt } from './common.js';

export const create: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  // Options such as capped, validator, timeseries or views change behaviour; reject them.
  const extra = Object.keys(body)
    .slice(1)
    .filter(
      (k) =>
        ![
          '$db',
          'lsid',
          '$readPreference',
          '$clusterTime',
          'writeConcern',
          'comment',
          'maxTimeMS',
          'apiVersion',
          'apiStrict',
          'apiDeprecationErrors',
        ].includes(k),
    );
  if (extra.length) notImplemented(`the '${extra[0]}' option of create`);
  if (state.store.get(db, name)) fail('NamespaceExists', `Collection ${db}.${name} already exists.`);
  state.store.ensure(db, name);
  return { ok: 1 };
};

/** collMod changes validators, views, TTL and index options: features this stand-in refuses. */
export const collMod: Handler = () => notImplemented('collMod');

export const drop: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  checkFields(body, []);
  const coll = state.store.drop(db, name);
  // Since 7.0 dropping a missing collection succeeds.
  return coll ? { nIndexesWas: coll.indexes.length, ns: coll.ns, ok: 1 } : { ok: 1 };
};

export const listCollections: Handler = ({ state, db, body }) => {
  checkFields(body, ['filter', 'nameOnly', 'authorizedCollections', 'cursor']);
  const match = compileFilter(optionalDoc(body, 'filter'));
  const rows = state.store
    .collections(db)
    .map((c) =>
      body.nameOnly
        ? { name: c.name, type: 'collection' }
        : {
            name: c.name,
            type: 'collection',
            options: {},
            info: { readOnly: false, uuid: c.uuid },
            idIndex: { v: 2, key: { _id: 1 }, name: '_id_' },
          },
    )
    .filter(match);
  const batchSize = isPlainObject(body.cursor) ? optionalInt(body.cursor, 'batchSize', { min: 0 }) : undefined;
  return state.cursors.start(`${db}.$cmd.listCollections`, rows, batchSize);
};

function describe(spec: IndexSpec): Doc {
  const out: Doc = { v: spec.v, key: spec.key, name: spec.name };
  for (const k of ['unique', 'sparse', 'partialFilterExpression', 'expireAfterSeconds', 'hidden'] as const) {
    if (spec[k] !== undefined) out[k] = spec[k];
  }
  return out;
}

/** Everything but the name: two specs with equal descriptions are identical indexes. */
function description(spec: IndexSpec): string {
  const { name: _name, ...rest } = describe(spec);
  return keyOf(rest);
}

/**
 * What identifies an index besides its name (MongoDB 5.0+, SERVER-47657): the key pattern, collation (always simple
 * here), partialFilterExpression, unique and sparse. Two specs that agree on it but not on the rest (a TTL, hidden)
 * are "equivalent"; MongoDB's IndexDescriptor::compareIndexOptions.
 */
function signatureOf(spec: IndexSpec): string {
  return keyOf([spec.key, spec.partialFilterExpression ?? null, !!spec.unique, !!spec.sparse]);
}

type Comparison = 'identical' | 'equivalent' | 'different';

function compareIndexOptions(requested: IndexSpec, existing: IndexSpec): Comparison {
  if (signatureOf(requested) !== signatureOf(existing)) return 'different';
  return description(requested) === description(existing) ? 'identical' : 'equivalent';
}

/**
 * Whether `spec` may be built next to `known`: undefined when it already exists identically (skipped), the spec when
 * it is new; otherwise fails as MongoDB 7.0's IndexCatalogImpl::_doesSpecConflictWithExisting does.
 */
function conflictCheck(spec: IndexSpec, known: IndexSpec[]): IndexSpec | undefined {
  const shown = (s: IndexSpec) => formatValue(describe(s));
  const sameName = known.find((s) => s.name === spec.name);
  if (sameName) {
    const comparison = compareIndexOptions(spec, sameName);
    if (comparison === 'different') {
      fail(
        'IndexKeySpecsConflict',
        `An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: ${shown(spec)}, existing index: ${shown(sameName)}`,
      );
    }
    if (comparison === 'equivalent') {
      fail(
        'IndexOptionsConflict',
        `An equivalent index already exists with the same name but different options. Requested index: ${shown(spec)}, existing index: ${shown(sameName)}`,
      );
    }
    return undefined;
  }
  const sameSignature = known.find((s) => signatureOf(s) === signatureOf(spec));
  if (sameSignature) {
    if (compareIndexOptions(spec, sameSignature) === 'equivalent') {
      fail(
        'IndexOptionsConflict',
        `An equivalent index already exists with a different name and options. Requested index: ${shown(spec)}, existing index: ${shown(sameSignature)}`,
      );
    }
    fail('IndexOptionsConflict', `Index already exists with a different name: ${sameSignature.name}`);
  }
  return spec;
}

export const createIndexes: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  checkFields(body, ['indexes', 'commitQuorum', 'ignoreUnknownIndexOptions']);
  if (!Array.isArray(body.indexes) || body.indexes.length === 0)
    fail('BadValue', 'Must specify at least one index to create');
  const specs = body.indexes.map(normaliseSpec);
  const createdCollection = !state.store.get(db, name);
  const coll = state.store.ensure(db, name);
  const before = coll.indexes.length;
  const toBuild: IndexSpec[] = [];
  for (const spec of specs) {
    const known = [...coll.indexes.map((i) => i.spec), ...toBuild];
    // createIndex({_id: 1}) under any name is a no-op.
    const idIndex = known.find((s) => s.name === '_id_');
    if (idIndex && description({ ...spec, name: '_id_' }) === description(idIndex)) continue;
    const build = conflictCheck(spec, known);
    if (build) toBuild.push(build);
  }
  // Build all or nothing: roll back indexes of this command if one build fails.
  const built: string[] = [];
  try {
    for (const spec of toBuild) {
      coll.addIndex(spec);
      built.push(spec.name);
    }
  } catch (e) {
    built.forEach((n) => coll.dropIndex(n));
    throw e;
  }
  const reply: Doc = {
    numIndexesBefore: before,
    numIndexesAfter: coll.indexes.length,
    createdCollectionAutomatically: createdCollection,
  };
  if (toBuild.length === 0) reply.note = 'all indexes already exist';
  return { ...reply, ok: 1 };
};

export const listIndexes: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  checkFields(body, ['cursor', 'includeBuildUUIDs', 'includeIndexBuildInfo']);
  const coll = state.store.get(db, name);
  if (!coll) fail('NamespaceNotFound', `ns does not exist: ${ns(db, name)}`);
  const batchSize = isPlainObject(body.cursor) ? optionalInt(body.cursor, 'batchSize', { min: 0 }) : undefined;
  return state.cursors.start(
    `${db}.$cmd.listIndexes.${name}`,
    coll.indexes.map((i) => describe(i.spec)),
    batchSize,
  );
};

export const dropIndexes: Handler = ({ state, db, body }) => {
  const name = collectionName(body);
  checkFields(body, ['index']);
  const coll = state.store.get(db, name);
  if (!coll) fail('NamespaceNotFound', `ns not found ${ns(db, name)}`);
  const before = coll.indexes.length;
  const target = body.index;
  let names: string[];
  if (target === '*') names = coll.secondary.map((i) => i.spec.name);
  else if (typeof target === 'string') names = [target];
  else if (Array.isArray(target)) names = target.map(String);
  else if (isPlainObject(target)) {
    const idx = coll.indexes.find((i) => keyOf(i.spec.key) === keyOf(target));
    if (!idx) fail('IndexNotFound', `can't find index with key: ${formatValue(target)}`);
    names = [idx.spec.name];
  } else {
    fail('TypeMismatch', "BSON field 'dropIndexes.index' is missing or the wrong type");
  }
  for (const n of names) {
    if (n === '_id_') fail('InvalidOptions', 'cannot drop _id index');
    if (!coll.indexes.some((i) => i.spec.name === n)) fail('IndexNotFound', `index not found with name [${n}]`);
  }
  names.forEach((n) => coll.dropIndex(n));
  return { nIndexesWas: before, ok: 1 };
};
