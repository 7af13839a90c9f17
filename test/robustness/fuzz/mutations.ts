import fc from 'fast-check';
import { anyJson } from './schema-arbitrary.js';

/** A request body exactly as it goes on the wire, plus a label saying how it was made. */
export interface WireBody {
  label: string;
  payload?: string | Buffer;
  contentType?: string;
}

/**
 * Raw JSON text is spliced in through placeholders: a value or key `@@raw0@@` in the object is
 * replaced, quotes included, by `raws[0]` after JSON.stringify. This is how `__proto__` becomes a real
 * own key and `1e309` reaches the parser as written.
 */
const placeholder = (index: number) => `@@raw${index}@@`;

function render(value: unknown, raws: string[] = []): string {
  let text = JSON.stringify(value) ?? 'null';
  raws.forEach((raw, index) => {
    text = text.replace(JSON.stringify(placeholder(index)), () => raw);
  });
  return text;
}

const json = (label: string, text: string): WireBody => ({ label, payload: text, contentType: 'application/json' });

const asObject = (base: unknown): Record<string, unknown> =>
  base && typeof base === 'object' && !Array.isArray(base) ? { ...base } : {};

/** Picks one of the body's own keys (or a made-up one when it has none) by a generated index. */
function keyAt(base: Record<string, unknown>, index: number): string {
  const keys = Object.keys(base);
  return keys[index % keys.length] ?? 'name';
}

function deepText(depth: number, kind: 'array' | 'object'): string {
  return kind === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

const ODD_NUMBERS = [
  '1e309',
  '-1e309',
  '-0',
  '1e-400',
  '18446744073709551616',
  '"NaN"',
  '"Infinity"',
  '9007199254740993',
  '0.5',
  '-1',
  '1E2',
  '0e0',
];
const WRONG_TYPES: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.integer(),
  fc.boolean(),
  fc.string({ maxLength: 5 }),
  fc.array(anyJson, { maxLength: 2 }),
  fc.constant({}),
);
const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'];
const MONGO_VALUES: unknown[] = [
  { $gt: '' },
  { $ne: null },
  { $where: 'sleep(100)' },
  { $regex: '.*' },
  { $in: [] },
  { $expr: { $eq: [1, 1] } },
];
const MONGO_KEYS = ['$where', '$set', '$gt', 'a.b', '$', '.', 'metadata.deal_value', '_id', 'company_id'];
const BAD_UTF8: number[][] = [
  [0xff, 0xfe],
  [0xc3, 0x28],
  [0xed, 0xa0, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xc0, 0xaf],
  [0x80],
];
const BROKEN_JSON = [
  '',
  '{',
  '{"a":1,}',
  "{'a':1}",
  '{"a":NaN}',
  '{"a":undefined}',
  '\ufeff{}',
  '{"a":1}{"b":2}',
  '[1,2',
  '"unterminated',
  'nul',
  '{"a":"\\x41"}',
];
const CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'APPLICATION/JSON',
  'application/json-patch+json',
  'application/jsonx',
  undefined,
];

/** The mutations of DECISIONS.md's hostile-input list, applied to a valid-looking body. */
export function wireBodyArbitrary(base: fc.Arbitrary<unknown>): fc.Arbitrary<WireBody> {
  const withBase = <T>(param: fc.Arbitrary<T>, make: (body: Record<string, unknown>, param: T) => WireBody) =>
    fc.tuple(base, param).map(([body, value]) => make(asObject(body), value));
  return fc.oneof(
    { weight: 8, arbitrary: base.map((body) => json('valid', render(body))) },
    {
      weight: 2,
      arbitrary: withBase(fc.tuple(fc.nat(), WRONG_TYPES), (body, [index, value]) =>
        json('wrong_type', render({ ...body, [keyAt(body, index)]: value })),
      ),
    },
    {
      weight: 1,
      arbitrary: withBase(fc.tuple(fc.string({ maxLength: 10 }), anyJson), (body, [key, value]) =>
        json('extra_key', render({ ...body, [key]: value })),
      ),
    },
    {
      weight: 2,
      arbitrary: withBase(
        fc.tuple(fc.constantFrom(...MONGO_KEYS), fc.constantFrom(...MONGO_VALUES), fc.nat(), fc.boolean()),
        (body, [key, value, index, inMetadata]) => {
          if (inMetadata)
            return json('mongo_operator', render({ ...body, metadata: { [key]: value, [keyAt(body, index)]: value } }));
          return json('mongo_operator', render({ ...body, [key]: 1, [keyAt(body, index)]: value }));
        },
      ),
    },
    {
      weight: 2,
      arbitrary: withBase(
        fc.tuple(fc.constantFrom(...PROTO_KEYS), fc.constantFrom('top', 'metadata', 'nested')),
        (body, [key, where]) => {
          const polluted = '{"polluted":true,"isAdmin":true,"prototype":{"polluted":true}}';
          const raws = [JSON.stringify(key), polluted];
          const shaped =
            where === 'top'
              ? { ...body, [placeholder(0)]: placeholder(1) }
              : where === 'metadata'
                ? { ...body, metadata: { [placeholder(0)]: placeholder(1) } }
                : { ...body, conditions: { [placeholder(0)]: placeholder(1) } };
          return json('proto_key', render(shaped, raws));
        },
      ),
    },
    {
      weight: 1,
      arbitrary: withBase(fc.tuple(fc.nat(), fc.constantFrom('x', 'é', '€', '\u0000', '𝄞')), (body, [index, char]) =>
        json('huge_string', render({ ...body, [keyAt(body, index)]: char.repeat(100_000) })),
      ),
    },
    {
      weight: 1,
      arbitrary: withBase(
        fc.tuple(
          fc.constantFrom(64, 1_000, 5_000, 20_000),
          fc.constantFrom<'array' | 'object'>('array', 'object'),
          fc.boolean(),
        ),
        (body, [depth, kind, whole]) =>
          json(
            'deep_nesting',
            whole ? deepText(depth, kind) : render({ ...body, metadata: placeholder(0) }, [deepText(depth, kind)]),
          ),
      ),
    },
    {
      weight: 1,
      arbitrary: withBase(fc.tuple(fc.nat(), fc.constantFrom(...BAD_UTF8)), (body, [index, bytes]) => {
        const [before = '', after = ''] = render({ ...body, [keyAt(body, index)]: placeholder(0) }).split(
          placeholder(0),
        );
        return {
          label: 'invalid_utf8',
          payload: Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]),
          contentType: 'application/json',
        };
      }),
    },
    {
      weight: 2,
      arbitrary: withBase(fc.tuple(fc.nat(), fc.constantFrom(...ODD_NUMBERS)), (body, [index, number]) =>
        json('odd_number', render({ ...body, [keyAt(body, index)]: placeholder(0) }, [number])),
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom(...BROKEN_JSON).map((text) => json('broken_json', text)) },
    {
      weight: 1,
      arbitrary: fc
        .oneof(fc.array(anyJson, { maxLength: 3 }), fc.string(), fc.integer(), fc.constant(null), fc.boolean())
        .map((value) => json('top_level_type', render(value))),
    },
    {
      weight: 1,
      arbitrary: withBase(fc.constantFrom(...CONTENT_TYPES), (body, contentType) => ({
        label: 'content_type',
        payload: render(body),
        contentType,
      })),
    },
    {
      weight: 1,
      arbitrary: withBase(
        fc.tuple(fc.nat(), fc.constantFrom('"\\ud800"', '"\\u0000"', '"a\\udfff"', '"\\ud83d\\ude00"')),
        (body, [index, escaped]) =>
          json('escaped_unicode', render({ ...body, [keyAt(body, index)]: placeholder(0) }, [escaped])),
      ),
    },
  );
}

const enc = encodeURIComponent;
const ODD_QUERY_VALUES = [
  '',
  '0',
  '201',
  '-1',
  '1e2',
  '1.5',
  'NaN',
  'Infinity',
  ' 5',
  '0x10',
  '%00',
  '%ff',
  '%zz',
  'true',
  '[]',
  '{}',
  '$gt',
];

/** A query string from valid-looking parameters, then broken: repeated keys, arrays, odd encodings. */
export function queryArbitrary(
  base: fc.Arbitrary<Record<string, string>>,
): fc.Arbitrary<{ label: string; query: string }> {
  const encode = (params: Record<string, string>) =>
    Object.entries(params).map(([key, value]) => `${enc(key)}=${enc(value)}`);
  const build = (label: string, parts: string[]) => ({ label, query: parts.length > 0 ? `?${parts.join('&')}` : '' });
  const firstKey = (params: Record<string, string>) => Object.keys(params)[0] ?? 'limit';
  return fc.oneof(
    { weight: 4, arbitrary: base.map((params) => build('valid', encode(params))) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(base, fc.constantFrom('limit', 'sort', 'cursor'))
        .map(([params, key]) => build('repeated_key', [...encode(params), `${key}=1`, `${key}=2`])),
    },
    {
      weight: 1,
      arbitrary: base.map((params) =>
        build('array_key', [...encode(params), `${firstKey(params)}[]=a`, `${firstKey(params)}[x]=b`]),
      ),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(base, fc.constantFrom(...ODD_QUERY_VALUES))
        .map(([params, value]) => build('odd_value', [...encode(params).slice(1), `${firstKey(params)}=${value}`])),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          base,
          fc.constantFrom(
            '$where=1',
            '__proto__[x]=1',
            'constructor[prototype][x]=1',
            'a.b=1',
            'unknown=1',
            'limit',
            '=',
            '&&',
            `x=${'a'.repeat(20_000)}`,
          ),
        )
        .map(([params, raw]) => build('hostile_key', [...encode(params), raw])),
    },
    {
      weight: 1,
      arbitrary: base.map((params) =>
        build('many_params', [...encode(params), ...Array.from({ length: 1_000 }, (_, index) => `p${index}=${index}`)]),
      ),
    },
  );
}

/** Path parameter values a client might send: real ids (own and foreign) and hostile spellings. */
export function pathValueArbitrary(real: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...real) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '%00',
        '..',
        '%2e%2e',
        '.',
        '%2F',
        '..%2F..%2Fetc%2Fpasswd',
        '%ff',
        '%',
        '$where',
        '%7B%22%24gt%22%3A%22%22%7D',
        'null',
        '__proto__',
        'constructor',
        'x'.repeat(10_000),
        'itm_000000000000000000000000',
      ),
    },
    { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 30, unit: 'grapheme' }).map(enc) },
  );
}
