import fastJson from 'fast-json-stringify';
import { z } from 'zod';

type JsonSchema = Record<string, unknown>;

/** Keywords that only document a schema; fast-json-stringify would pass some of them to ajv. */
const ANNOTATIONS = new Set([
  '$schema',
  'id',
  'title',
  'description',
  'example',
  'examples',
  'default',
  'deprecated',
  'readOnly',
  'writeOnly',
]);

/** Keywords whose value maps names (data, not keywords) to schemas. */
const NAMED_SCHEMAS = new Set(['properties', 'patternProperties', 'definitions', '$defs']);

/**
 * Makes zod's JSON Schema quick to serialize: drops annotations and turns `anyOf: [T, null]` (zod's
 * nullable) into `type: [T, 'null']`, which fast-json-stringify writes without trying each branch.
 */
function simplify(node: unknown, closed: ReadonlySet<string> = new Set()): unknown {
  if (Array.isArray(node)) return node.map((child) => simplify(child, closed));
  if (!node || typeof node !== 'object') return node;
  const schema: JsonSchema = {};
  for (const [key, value] of Object.entries(node as JsonSchema)) {
    if (ANNOTATIONS.has(key)) continue;
    // Property names are data, not keywords: keep every one, even `description`.
    schema[key] = NAMED_SCHEMAS.has(key) ? mapValues(value as JsonSchema, closed) : simplify(value, closed);
  }
  const branches = schema.anyOf as JsonSchema[] | undefined;
  if (branches?.length === 2) {
    const nullIndex = branches.findIndex((branch) => branch.type === 'null' && Object.keys(branch).length === 1);
    const other = branches[1 - nullIndex];
    if (
      nullIndex !== -1 &&
      other !== undefined &&
      typeof other.type === 'string' &&
      !('anyOf' in other) &&
      !('$ref' in other)
    ) {
      const { anyOf: _, ...rest } = schema;
      return { ...rest, ...other, type: [other.type, 'null'] };
    }
  }
  // Any other union is written by validating the data against each branch; an object branch would
  // then reject data with keys the schema does not declare (which zod strips). Refuse those at startup,
  // but for a closed marker object (e.g. TruncatedValue: no other keys, and a constant that tells it apart).
  const isClosed = (option: JsonSchema) => isMarker(option) || closed.has(option.$ref as string);
  for (const union of ['anyOf', 'oneOf'] as const) {
    const options = schema[union] as JsonSchema[] | undefined;
    const open = options?.filter((option) => !isClosed(option));
    if (open?.some((option) => option.type === 'object' || '$ref' in option || 'properties' in option)) {
      throw new Error(
        `response schemas may not contain unions of objects (${union}); flatten the union into one object`,
      );
    }
  }
  return schema;
}

function mapValues(properties: JsonSchema, closed: ReadonlySet<string>): JsonSchema {
  return Object.fromEntries(Object.entries(properties).map(([name, value]) => [name, simplify(value, closed)]));
}

/** An object no data can be mistaken for: no undeclared keys, and a property of constant value. */
function isMarker(schema: JsonSchema): boolean {
  const properties = Object.values((schema.properties ?? {}) as Record<string, JsonSchema>);
  return schema.additionalProperties === false && properties.some((property) => 'const' in property);
}

/** The JSON Schema a response is written with: the zod schema's output side, simplified. */
export function responseJsonSchema(schema: z.ZodType): JsonSchema {
  const json = z.toJSONSchema(schema, { io: 'output', target: 'draft-7', unrepresentable: 'any' }) as JsonSchema;
  // Named schemas that are closed objects, which a union may hold (see simplify).
  const definitions = Object.entries((json.definitions ?? {}) as Record<string, JsonSchema>);
  const closed = new Set(definitions.filter(([, value]) => isMarker(value)).map(([name]) => `#/definitions/${name}`));
  return simplify(json, closed) as JsonSchema;
}

/**
 * Fastify serializer compiler for zod response schemas. Instead of running zod's parse on every
 * response (a third of the CPU of a small request), each schema is compiled once into a
 * fast-json-stringify function. It writes only the declared properties, like zod's strip, so a
 * document with internal fields can never leak them; catchall schemas (an item's custom fields)
 * keep their additional properties.
 */
export function zodResponseSerializerCompiler({ schema }: { schema: unknown }): (data: unknown) => string {
  return fastJson(responseJsonSchema(schema as z.ZodType) as never) as (data: unknown) => string;
}
