import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { ValidationError } from '../shared/errors.js';
import { isIsoDate, isIsoTimestamp } from '../shared/time.js';
import { problemsFromZodIssues } from '../shared/zod-problems.js';
import type { PipelineDoc, FieldDefinition } from './pipelines.js';

export type CustomValue = string | number | boolean | string[] | null;
export type CustomValues = Record<string, CustomValue>;

/** A date field takes an ISO date (kept as is) or an ISO timestamp (normalised to UTC with ms). */
const dateValue = z
  .string()
  .refine((value) => isIsoDate(value) || isIsoTimestamp(value), 'expected an ISO 8601 date or timestamp')
  .transform((value) => (isIsoDate(value) ? value : new Date(value).toISOString()));

/** The values one custom field takes (also what a hook's `filter.changes` may name for it). */
export function valueSchema(field: FieldDefinition): z.ZodType<CustomValue> {
  switch (field.type) {
    case 'text':
      return z.string().max(10_000);
    case 'number':
      return z.number().refine(Number.isFinite, 'expected a finite number');
    case 'boolean':
      return z.boolean();
    case 'date':
      return dateValue;
    case 'select':
      return z.enum(field.options as [string, ...string[]]);
    case 'multi_select':
      return z
        .array(z.enum(field.options as [string, ...string[]]))
        .max(200)
        .refine((values) => new Set(values).size === values.length, 'must not repeat a value');
    case 'email':
      return z.email().max(320);
    case 'url':
      return z.url({ protocol: /^https?$/ }).max(2_000);
  }
}

/**
 * The metadata schema of one pipeline revision. On create, required fields must be present and
 * non-null; on update every field is optional but a required field still cannot be cleared.
 */
function buildMetadataSchema(pipeline: PipelineDoc, mode: 'create' | 'update') {
  const shape: Record<string, z.ZodType> = {};
  for (const field of pipeline.fields) {
    const value = valueSchema(field);
    shape[field.name] = field.required ? (mode === 'create' ? value : value.optional()) : value.nullable().optional();
  }
  return z.strictObject(shape);
}

const schemaCache = new LRUCache<string, ReturnType<typeof buildMetadataSchema>>({ max: 2_000 });

function metadataSchemaFor(pipeline: PipelineDoc, mode: 'create' | 'update') {
  const cacheKey = `${pipeline._id}:${pipeline.revision}:${mode}`;
  let schema = schemaCache.get(cacheKey);
  if (!schema) {
    schema = buildMetadataSchema(pipeline, mode);
    schemaCache.set(cacheKey, schema);
  }
  return schema;
}

/**
 * A custom value by field name, own keys only: a field may be named like an `Object.prototype` member
 * in data stored before such names were refused, and `custom.toString` must not find the method.
 */
export function customValueOf(values: Record<string, unknown> | undefined, name: string): unknown {
  return values && Object.hasOwn(values, name) ? values[name] : undefined;
}

/**
 * Validates `metadata` against the pipeline blueprint; errors carry paths like `metadata.deal_value`.
 * More keys than the pipeline has fields cannot all be fields: refused before any key is judged
 * (DECISIONS.md section 12.4). The values are judged on a copy without a prototype, so a field named
 * `toString` that was not sent reads as absent, and the result holds every key as its own.
 */
export function validateMetadata(
  pipeline: PipelineDoc,
  metadata: Record<string, unknown>,
  mode: 'create' | 'update',
): CustomValues {
  const keys = Object.keys(metadata);
  if (keys.length > pipeline.fields.length) {
    throw ValidationError.single(
      'metadata',
      `has ${keys.length} keys but this pipeline has ${pipeline.fields.length} custom fields`,
    );
  }
  const sent: Record<string, unknown> = Object.create(null);
  for (const key of keys) sent[key] = metadata[key];
  const result = metadataSchemaFor(pipeline, mode).safeParse(sent);
  if (!result.success) throw new ValidationError(problemsFromZodIssues(result.error.issues, ['metadata']));
  const values: CustomValues = Object.create(null);
  for (const [key, value] of Object.entries(result.data)) if (value !== undefined) values[key] = value as CustomValue;
  return values;
}
