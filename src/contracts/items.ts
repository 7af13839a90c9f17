import { z } from 'zod';
import { errorTypeUri } from '../http/error-reference.js';
import { problemSchema } from '../http/problem.js';
import { limitSchema } from '../shared/pagination.js';
import { isoTimestampOutput, isoTimestampQuery, toIso } from '../shared/time.js';
import { customValueOf } from './custom-fields.js';
import type { OutboxFields } from '../shared/outbox.js';
import type { CustomValues, CustomValue } from './custom-fields.js';
import type { EventEnvelope } from './envelope.js';
import type { PipelineDoc } from './pipelines.js';

const customValueSchema = z.union([z.string(), z.number(), z.boolean(), z.array(z.string()), z.null()]);

/** One entity schema; custom fields are top-level additional properties (DECISIONS.md section 6). */
/** The item the OpenAPI examples show (the batch example shows it again, updated). */
const ITEM_EXAMPLE = {
  item_id: 'itm_6740b7a1c2d3e4f5a6b7c8d9',
  short_id: 'I-1042',
  name: 'Acme renewal',
  pipeline: 'pip_6740b7a1c2d3e4f5a6b7c8d0',
  stage: 'stg_6740b7a1c2d3e4f5a6b7c8d1',
  status: null,
  contact_id: 'c-981',
  source: 'api',
  external_id: 'crm-42',
  created_at: '2026-11-22T09:30:00.000Z',
  updated_at: '2026-11-22T09:30:00.000Z',
  version: 1,
  deal_value: 12000,
  industry: 'software',
};

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
    external_id: z.string().nullable().describe("The integrator's own id, unique per company; null when none"),
    created_at: isoTimestampOutput,
    updated_at: isoTimestampOutput,
    version: z.number().int().min(1).max(2_147_483_647).describe('Grows by 1 with every change').meta({ example: 3 }),
  })
  .catchall(customValueSchema)
  .meta({
    id: 'Item',
    description: 'Core fields, then one key per custom field of the pipeline blueprint (null when unset).',
    example: ITEM_EXAMPLE,
  });

export type ItemResponse = z.infer<typeof itemSchema>;

const metadataSchema = z
  .record(z.string(), z.unknown())
  .describe('Custom field values keyed by field name; validated against the pipeline blueprint')
  .meta({ example: { deal_value: 12000, industry: 'software' } });

const nonEmptyId = z.string().min(1).max(100);

/** DECISIONS.md section 12.3: 1–255 characters, unique per company. */
export const externalIdSchema = z
  .string()
  .min(1)
  .max(255)
  .refine((value) => !/\p{Cc}/u.test(value), 'must not contain control characters')
  .describe("The integrator's own id of the item (1–255 characters), unique per company");

export const createItemBody = z
  .strictObject({
    name: z.string().trim().min(1).max(500),
    pipeline_id: nonEmptyId,
    stage_id: nonEmptyId,
    status_id: nonEmptyId.nullable().optional(),
    contact_id: z.string().max(200).nullable().optional(),
    source: z.string().trim().min(1).max(100).optional(),
    external_id: externalIdSchema.optional(),
    metadata: metadataSchema.optional(),
  })
  .meta({
    example: {
      name: 'Acme renewal',
      pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d0',
      stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d1',
      metadata: { deal_value: 12000 },
    },
  });

export const updateItemBody = z
  .strictObject({
    name: z.string().trim().min(1).max(500).optional(),
    stage_id: nonEmptyId.optional(),
    status_id: nonEmptyId.nullable().optional(),
    contact_id: z.string().max(200).nullable().optional(),
    external_id: externalIdSchema.nullable().optional().describe('null removes it'),
    // Any integer is accepted: one that is not the current version (0 and below included) is a 409, not a
    // 400. The document shows the range versions actually take.
    version: z
      .number()
      .int()
      .optional()
      .describe('Expected current version (optimistic locking)')
      .meta({ minimum: 1, maximum: 2_147_483_647, example: 3 }),
    metadata: metadataSchema.optional(),
  })
  .meta({ example: { stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d2', version: 3, metadata: { deal_value: 15000 } } });

const versionSchema = z
  .number()
  .int()
  .describe('Expected current version (optimistic locking)')
  .meta({ minimum: 1, maximum: 2_147_483_647, example: 3 });

/** PUT by external id: the create body's fields (the external id is in the path), optionally the expected version. */
export const upsertItemBody = createItemBody
  .omit({ external_id: true })
  .extend({ version: versionSchema.optional() })
  .meta({
    example: {
      name: 'Acme renewal',
      pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d0',
      stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d1',
      contact_id: 'c-981',
      metadata: { deal_value: 12000 },
    },
  });

export const externalIdParams = z.object({ external_id: externalIdSchema });

export const BATCH_OPS = ['create', 'update', 'upsert'] as const;
export const MAX_BATCH_OPERATIONS = 100;

/** Each operation of a batch is judged on its own (an invalid one is a 400 result, not a 400 request). */
export const batchOperationSchemas = {
  create: createItemBody.extend({ op: z.literal('create') }),
  update: updateItemBody.extend({ op: z.literal('update'), item_id: z.string().min(1).max(100) }),
  upsert: upsertItemBody.extend({ op: z.literal('upsert'), external_id: externalIdSchema }),
};

export const batchBody = z
  .strictObject({
    operations: z
      .array(
        z
          .looseObject({ op: z.enum(BATCH_OPS) })
          .describe(
            'create: `op` + the create body; update: `op`, `item_id` + the update body; upsert: `op`, `external_id` + the create body (and `version`)',
          ),
      )
      .min(1)
      .max(MAX_BATCH_OPERATIONS),
  })
  .meta({
    example: {
      operations: [
        {
          op: 'create',
          name: 'Globex expansion',
          pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d0',
          stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d1',
        },
        { op: 'update', item_id: 'itm_6740b7a1c2d3e4f5a6b7c8d9', stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d2' },
        {
          op: 'upsert',
          external_id: 'crm-42',
          name: 'Acme renewal',
          pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d0',
          stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d1',
        },
      ],
    },
  });

export const batchResponse = z
  .object({
    results: z.array(
      z
        .object({
          status: z
            .number()
            .int()
            .describe('201 created, 200 updated, 400, 404 or 409')
            .meta({ minimum: 200, maximum: 599, example: 201 }),
          item: itemSchema
            .optional()
            .describe(
              'The item after the operation, when it succeeded and the items before it in the answer weigh less than 1 MiB (the first always has it)',
            ),
          error: problemSchema.optional().describe('Why the operation failed (a problem object)'),
          truncated: z
            .literal(true)
            .optional()
            .describe(
              'The operation succeeded but its item would take the answer past its 1 MiB budget: `item_id` and `version` instead of `item`; read the item by its id',
            ),
          item_id: z.string().optional().describe('With `truncated`: the item the operation wrote'),
          version: z
            .number()
            .int()
            .min(1)
            .max(2_147_483_647)
            .optional()
            .describe('With `truncated`: its version after the operation')
            .meta({ example: 2 }),
        })
        .meta({ id: 'BatchResult' }),
    ),
  })
  .meta({
    id: 'BatchResults',
    description: 'One result per operation, in the order of the request',
    example: {
      results: [
        {
          status: 201,
          item: {
            item_id: 'itm_6740b7a1c2d3e4f5a6b7c8e1',
            short_id: 'I-1043',
            name: 'Globex expansion',
            pipeline: 'pip_6740b7a1c2d3e4f5a6b7c8d0',
            stage: 'stg_6740b7a1c2d3e4f5a6b7c8d1',
            status: null,
            contact_id: null,
            source: 'api',
            external_id: null,
            created_at: '2026-11-22T09:30:00.000Z',
            updated_at: '2026-11-22T09:30:00.000Z',
            version: 1,
          },
        },
        {
          status: 404,
          error: {
            type: errorTypeUri('not_found'),
            title: 'Not found',
            status: 404,
            code: 'not_found',
            detail: 'Item not found',
            request_id: '5f0c6f0e-0d7c-4b8e-9f43-2b7d1c1f9a10',
          },
        },
        {
          status: 200,
          item: { ...ITEM_EXAMPLE, created_at: '2026-11-20T08:00:00.000Z', version: 4 },
        },
      ],
    },
  });

export const ITEM_SORTS = ['created_at', '-created_at', 'updated_at', '-updated_at'] as const;

const listItemsParameters = {
  pipeline_id: z.string().optional(),
  stage_id: z.string().optional(),
  status_id: z.string().optional(),
  contact_id: z.string().optional(),
  external_id: externalIdSchema.optional(),
  created_after: isoTimestampQuery.optional(),
  updated_after: isoTimestampQuery.optional(),
  q: z
    .string()
    .max(200)
    .optional()
    .describe(
      'Words of the name starting with these words, case-insensitive (`q=acm ren` finds "Acme renewal"); a query without a letter or digit is 400',
    ),
  sort: z.enum(ITEM_SORTS).default('created_at'),
  limit: limitSchema,
  cursor: z.string().max(1_000).optional(),
};

/**
 * Query parameters of an item list that are neither named parameters nor custom-field filters. Own
 * names only: `toString` or `__proto__` is no parameter of ours because every object inherits one.
 */
export function unknownListItemsParameters(query: object): string[] {
  return Object.keys(query).filter((key) => !Object.hasOwn(listItemsParameters, key) && !isFilterParameter(key));
}

/**
 * The named parameters plus custom-field filters `metadata.<field>` / `metadata.<field>[<op>]`
 * (judged against the pipeline in search.ts); any other parameter is unknown. The catchall's output
 * cannot hold a `__proto__` key, so the route also checks the parsed query string before this schema.
 */
export const listItemsQuery = z
  .object(listItemsParameters)
  .catchall(z.union([z.string(), z.array(z.string())]))
  .superRefine((query, context) => {
    for (const key of unknownListItemsParameters(query))
      context.addIssue({ code: 'custom', path: [key], message: 'unknown field' });
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
    external_id: doc.external_id ?? null,
    created_at: toIso(doc.created_at),
    updated_at: toIso(doc.updated_at),
    version: doc.version,
  };
  for (const field of pipeline.fields)
    response[field.name] = (customValueOf(doc.custom, field.name) ?? null) as CustomValue;
  return response;
}

/** An item as stored in `items` (the items repository is the only code that reads or writes it). */
export interface ItemDoc extends OutboxFields<EventEnvelope> {
  _id: string;
  company_id: string;
  short_id: string;
  name: string;
  pipeline_id: string;
  stage_id: string;
  status_id: string | null;
  contact_id: string | null;
  source: string;
  /** Custom field values live in their own sub-document so they can never collide with core fields. */
  custom: CustomValues;
  /** Normalised comparable values for the duplicate check (see duplicates.ts). */
  dup_tokens: string[];
  /** The integrator's own id, unique per company among live items (null: none). */
  external_id: string | null;
  /** Lower-cased words of the name, for `q` (see search.ts). */
  name_words: string[];
  version: number;
  created_at: Date;
  updated_at: Date;
  /** Set by DELETE: the item is archived, not erased, and every read below leaves it out (null or absent: live). */
  archived_at?: Date | null;
  /** An archived item's external_id, moved aside so that the id can name a new item. */
  archived_external_id?: string;
}

/** The custom-field filters of a list: `metadata.<field>[<operator>]` (src/items/search.ts builds the query). */
export const FILTER_OPERATORS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'exists'] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

/** `metadata.deal_value[gte]` → field `deal_value`, operator `gte`; `metadata.industry` → `eq`. */
export const FILTER_PARAMETER = /^metadata\.([^[\]]+)(?:\[([^[\]]*)\])?$/;

export function isFilterParameter(name: string): boolean {
  return name.startsWith('metadata.');
}
