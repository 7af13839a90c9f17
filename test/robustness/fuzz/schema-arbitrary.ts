import fc from 'fast-check';
import { z } from 'zod';

/** The subset of JSON Schema that `z.toJSONSchema` produces for this project's request schemas. */
export interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  format?: string;
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
}

/** Valid-looking values by property name (real ids, timestamps, URLs), mixed into what the schema alone would give. */
export type Hints = Record<string, fc.Arbitrary<unknown>>;

/** The request schema of a route (a zod schema) as JSON Schema, input side (before transforms). */
export function jsonSchemaOf(schema: unknown): JsonSchema | undefined {
  if (!(schema instanceof z.ZodType)) return undefined;
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
}

export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 2 });

const TIMESTAMP_KEY = /(_at|_after|_before)$/;

export const timestampArb: fc.Arbitrary<string> = fc.oneof(
  fc
    .date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true })
    .map((date) => date.toISOString()),
  fc.constantFrom(
    '2026-11-22T10:30:00+01:00',
    '2026-11-22T09:30:00Z',
    '2026-13-45T99:99:99Z',
    '2026-11-22',
    'yesterday',
    '0000-00-00T00:00:00Z',
    '+275760-09-13T00:00:00.000Z',
  ),
);

function stringArb(node: JsonSchema, key: string | undefined): fc.Arbitrary<unknown> {
  if (node.pattern) return fc.stringMatching(new RegExp(node.pattern));
  if (node.format === 'uri')
    return fc.oneof(fc.webUrl(), fc.constantFrom('http://127.0.0.1:9/hook', 'ftp://x.example/', 'not a url'));
  if (key && TIMESTAMP_KEY.test(key)) return timestampArb;
  const maxLength = Math.min(node.maxLength ?? 40, 40);
  const minLength = Math.min(node.minLength ?? 0, maxLength);
  return fc.oneof(
    fc.string({ minLength, maxLength }),
    fc.string({ minLength, maxLength, unit: 'grapheme' }),
    fc.string({ minLength, maxLength, unit: 'binary' }),
  );
}

function objectArb(node: JsonSchema, root: JsonSchema, hints: Hints): fc.Arbitrary<unknown> {
  const properties = node.properties ?? {};
  const model = Object.fromEntries(
    Object.entries(properties).map(([name, child]) => [name, schemaArbitrary(child, root, hints, name)]),
  );
  const known = fc.record(model, { requiredKeys: (node.required ?? []).filter((name) => name in model) });
  if (node.additionalProperties && typeof node.additionalProperties === 'object') {
    const extra = fc.dictionary(fc.string({ maxLength: 12 }), schemaArbitrary(node.additionalProperties, root, hints), {
      maxKeys: 4,
    });
    return fc.tuple(known, extra).map(([a, b]) => ({ ...b, ...(a as object) }));
  }
  return known;
}

/**
 * An arbitrary of values that mostly satisfy `node`: the starting point the mutations then break.
 * A hint for the key replaces the schema (hints mix in foreign and junk values themselves).
 */
export function schemaArbitrary(node: JsonSchema, root: JsonSchema, hints: Hints, key?: string): fc.Arbitrary<unknown> {
  const hint = key ? hints[key] : undefined;
  return hint ?? plainArbitrary(node, root, hints, key);
}

function plainArbitrary(node: JsonSchema, root: JsonSchema, hints: Hints, key?: string): fc.Arbitrary<unknown> {
  if (node.$ref) {
    const name = node.$ref.replace('#/$defs/', '');
    return schemaArbitrary(root.$defs?.[name] ?? {}, root, hints, key);
  }
  if (node.const !== undefined) return fc.constant(node.const);
  if (node.enum) return fc.constantFrom(...node.enum);
  const alternatives = node.anyOf ?? node.oneOf;
  if (alternatives) return fc.oneof(...alternatives.map((child) => schemaArbitrary(child, root, hints, key)));
  switch (node.type) {
    case 'string':
      return stringArb(node, key);
    case 'integer':
      return fc.integer({ min: node.minimum ?? -1_000_000, max: node.maximum ?? 1_000_000 });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(schemaArbitrary(node.items ?? {}, root, hints), {
        minLength: node.minItems ?? 0,
        maxLength: Math.max(node.minItems ?? 0, Math.min(node.maxItems ?? 3, 3)),
      });
    case 'object':
      return objectArb(node, root, hints);
    default:
      return anyJson;
  }
}
