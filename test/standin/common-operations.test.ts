import { Long } from 'bson';
import { Query, updateOne } from 'mingo';
import { describe, expect, it } from 'vitest';
import { compileFilter, MINGO_OPTIONS, projectDocs } from '../../src/dev/mongo-standin/query.js';
import { applyUpdate, parseUpdate } from '../../src/dev/mongo-standin/updates.js';
import { clone, type Doc } from '../../src/dev/mongo-standin/values.js';

// The stand-in applies the most common update operators and equality filters itself (mingo rebuilds
// its whole operator context per call); this pins the results to what mingo, the reference for
// everything else, makes.
const documents: Doc[] = [
  { _id: 1, a: 1, b: 'x', arr: [1, 2, 3], d: new Date(5), o: { p: 1 } },
  { _id: 2 },
  { _id: 3, a: 0, arr: [], n: null },
];
const updates: Doc[] = [
  { $set: { a: 2, c: 'new' } },
  { $set: { a: 1 } },
  { $unset: { a: '', zz: '' } },
  { $inc: { a: 5, k: 1 } },
  { $inc: { a: 0 } },
  { $push: { arr: { $each: [4, 5] } } },
  { $push: { arr: { $each: [4, 5], $slice: -2 } } },
  { $push: { arr: { $each: [9], $slice: 2 } } },
  { $push: { newarr: { $each: [{ q: 1 }] } } },
  { $set: { o: { p: 1 } } },
  { $set: { o: { p: 2 } }, $unset: { b: '' } },
  { $set: { d: new Date(5) } },
  { $set: { d: new Date(6) } },
  { $push: { arr: { $each: [1], $slice: -50 } }, $set: { u: 1 } },
];

describe('common updates applied by the stand-in itself', () => {
  for (const [d, document] of documents.entries()) {
    for (const update of updates) {
      it(`document ${d + 1}, ${JSON.stringify(update)}`, () => {
        const ours = applyUpdate(clone(document), parseUpdate(clone(update)));
        // The reference, with the empty array the stand-in creates before a $push to a missing field.
        const reference = clone(document);
        for (const field of Object.keys((update.$push ?? {}) as Doc)) reference[field] ??= [];
        const seeded = JSON.stringify(reference);
        const result = updateOne([reference], {}, clone(update) as never, { cloneMode: 'copy' }, { idKey: '_id' });
        expect(ours.doc).toEqual(reference);
        expect(ours.modified).toBe(result.modifiedCount > 0 || JSON.stringify(reference) !== seeded);
      });
    }
  }
});

describe('scalar equality filters matched by the stand-in itself', () => {
  const stored: Doc[] = [
    { _id: 'a', company_id: 'c1', n: 5, flag: true },
    { _id: 'b', company_id: 'c2', n: 5.0, flag: false, tags: ['x', 'c1'] },
    { _id: 'c', company_id: ['c1', 'c3'], n: Long.fromNumber(5), flag: null },
    { _id: 'd', n: '5' },
  ];
  const filters: Doc[] = [
    { company_id: 'c1' },
    { company_id: 'c1', n: 5 },
    { n: 5 },
    { n: '5' },
    { flag: true },
    { flag: false },
    { _id: 'b', company_id: 'c2' },
    { tags: 'c1' },
    { missing: 'x' },
    { company_id: 'c3', _id: 'c' },
  ];
  for (const filter of filters) {
    it(JSON.stringify(filter), () => {
      const matcher = compileFilter(filter);
      const reference = new Query(filter, MINGO_OPTIONS);
      expect(stored.map((doc) => matcher(doc))).toEqual(stored.map((doc) => reference.test(doc)));
    });
  }
});

describe('top-level projections applied by the stand-in itself', () => {
  const stored: Doc[] = [
    { _id: 'a', name: 'x', pending: [{ e: 1 }], nested: { deep: 1 }, n: 2 },
    { name: 'no id', n: 3 },
    { _id: 'c' },
  ];
  const projections: Doc[] = [
    { pending: 0 },
    { pending: 0, nested: false },
    { name: 1 },
    { name: true, n: 1, _id: 0 },
    { _id: 1 },
    { _id: 0 },
    { missing: 1 },
    { missing: 0 },
  ];
  for (const projection of projections) {
    it(JSON.stringify(projection), () => {
      const reference = new Query({}, MINGO_OPTIONS).find<Doc>(stored, projection).all();
      const projected = projectDocs(stored, projection);
      expect(projected).toEqual(reference);
      // Stored field order, as MongoDB keeps it.
      expect(projected.map((doc) => Object.keys(doc))).toEqual(
        stored.map((doc) => Object.keys(doc).filter((key) => key in (projected[stored.indexOf(doc)] ?? {}))),
      );
    });
  }
});
