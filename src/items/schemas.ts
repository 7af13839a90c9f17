import { z } from 'zod';
import type { PipelineDoc } from '../pipelines/repository.js';
import { limitSchema } from '../shared/pagination.js';
import { isoTimestampInput, isoTimestampOutput, isoTimestampQuery, toIso } from '../shared/time.js';
import type { ItemDoc } from './repository.js';

const customValueSchema = z.union([z.string(), z.number(), z.boolean(), z.array(z.string()), z.null()]);

/** One entity schema; custom fields are top-level additional properties (DECISIONS.md section 6). */
export const itemSchema = z
  .object({
    item_id: z.string(),
    short_id: z.string(),
    name: z.string(),
    pipeline: z.string().describe('pipeline_id of the item'),
    stage: z.string().describe('stage_id of the item'),
    status: z.string().nullable().describe('status_id of the item, null when none'),
    contact_id: z.string().nullable(),
    source: z.string(),
    created_at: isoTimestampOutput,
    updated_at: isoTimestampOutput,
    version: z.number().int(),
  })
  .catchall(customValueSchema)
  .meta({
    id: 'Item',
    description: 'Core fields, then one key per custom field of the pipeline blueprint (null when unset).',
    example: {
      item_id: 'itm_6740b7a1c2d3e4f5a6b7c8d9', short_id: 'I-1042', name: 'Acme renewal', pipeline: 'pip_6740b7a1c2d3e4f5a6b7c8d0',
      stage: 'stg_6740b7a1c2d3e4f5a6b7c8d1', status: null, contact_id: 'c-981', source: 'api',
      created_at: '2026-11-22T09:30:00.000Z', updated_at: '2026-11-22T09:30:00.000Z', version: 1,
      deal_value: 12000, industry: 'software',
    },
  });

export type ItemResponse = z.infer<typeof itemSchema>;

const metadataSchema = z
  .record(z.string(), z.unknown())
  .describe('Custom field values keyed by field name; validated against the pipeline blueprint')
  .meta({ example: { deal_value: 12000, industry: 'software' } });

const nonEmptyId = z.string().min(1).max(100);

export const createItemBody = z
  .strictObject({
    name: z.string().trim().min(1).max(500),
    pipeline_id: nonEmptyId,
    stage_id: nonEmptyId,
    status_id: nonEmptyId.nullable().optional(),
    contact_id: z.string().max(200).nullable().optional(),
    source: z.string().trim().min(1).max(100).optional(),
    metadata: metadataSchema.optional(),
  })
  .meta({ example: { name: 'Acme renewal', pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d0', stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d1', metadata: { deal_value: 12000 } } });

export const updateItemBody = z
  .strictObject({
    name: z.string().trim().min(1).max(500).optional(),
    stage_id: nonEmptyId.optional(),
    status_id: nonEmptyId.nullable().optional(),
    contact_id: z.string().max(200).nullable().optional(),
    // Any integer: one that is not the current version (0 and below included) is a 409, not a 400.
    version: z.number().int().optional().describe('Expected current version (optimistic locking)'),
    metadata: metadataSchema.optional(),
  })
  .meta({ example: { stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d2', version: 3, metadata: { deal_value: 15000 } } });

export const ITEM_SORTS = ['created_at', '-created_at', 'updated_at', '-updated_at'] as const;

export const listItemsQuery = z.strictObject({
  pipeline_id: z.string().optional(),
  stage_id: z.string().optional(),
  status_id: z.string().optional(),
  contact_id: z.string().optional(),
  created_after: isoTimestampQuery.optional(),
  updated_after: isoTimestampQuery.optional(),
  sort: z.enum(ITEM_SORTS).default('created_at'),
  limit: limitSchema,
  cursor: z.string().max(1_000).optional(),
});

export const checkDuplicatesBody = z.strictObject({
  pipeline_id: nonEmptyId,
  name: z.string().max(500).optional(),
  contact_id: z.string().max(200).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

export const checkDuplicatesResponse = z
  .object({
    has_duplicates: z.boolean(),
    matches: z.array(z.object({ item: itemSchema, matched_fields: z.array(z.string()) })),
  })
  .meta({ id: 'DuplicateCheckResult' });

/** The one mapping from a stored item to its API shape: flattens custom fields, renames ids. */
export function toItemResponse(doc: ItemDoc, pipeline: PipelineDoc): ItemResponse {
  const response: ItemResponse = {
    item_id: doc._id,
    short_id: doc.short_id,
    name: doc.name,
    pipeline: doc.pipeline_id,
    stage: doc.stage_id,
    status: doc.status_id,
    contact_id: doc.contact_id,
    source: doc.source,
    created_at: toIso(doc.created_at),
    updated_at: toIso(doc.updated_at),
    version: doc.version,
  };
  for (const field of pipeline.fields) response[field.name] = doc.custom[field.name] ?? null;
  return response;
}
