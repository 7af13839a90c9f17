import { z } from 'zod';

/** C0 controls and DEL, which no field name needs and which break logs and CSV exports. */
function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

export const FIELD_TYPES = ['text', 'number', 'boolean', 'date', 'select', 'multi_select', 'email', 'url'] as const;

/**
 * Output keys of an item (DECISIONS.md section 6), the prototype names, and the names of every
 * `Object.prototype` member (`toString`, `valueOf`, `hasOwnProperty`...; section 12.4): no custom field
 * may take them.
 */
export const RESERVED_FIELD_NAMES = new Set([
  ...Object.getOwnPropertyNames(Object.prototype),
  'item_id',
  'short_id',
  'name',
  'pipeline',
  'stage',
  'status',
  'contact_id',
  'source',
  'external_id',
  'created_at',
  'updated_at',
  'version',
  '__proto__',
  'constructor',
  'prototype',
]);

/**
 * DECISIONS.md section 6: a field name may not collide with an output key, start with `$` or `_`,
 * contain `.`, or be a prototype name. Control characters and surrounding spaces are refused too.
 */
export const fieldNameSchema = z
  .string()
  .min(1)
  .max(64)
  .refine((name) => !/^[$_]/.test(name), 'must not start with $ or _')
  .refine((name) => !name.includes('.'), 'must not contain a dot')
  .refine(
    (name) => !hasControlCharacter(name) && name.trim() === name,
    'must not contain control characters or surrounding spaces',
  )
  .refine((name) => !RESERVED_FIELD_NAMES.has(name), 'is a reserved name');

export const fieldDefinitionSchema = z
  .strictObject({
    name: fieldNameSchema,
    type: z.enum(FIELD_TYPES),
    required: z.boolean().default(false),
    options: z.array(z.string().trim().min(1).max(200)).min(1).max(200).optional(),
  })
  .superRefine((field, ctx) => {
    const needsOptions = field.type === 'select' || field.type === 'multi_select';
    if (needsOptions && !field.options) {
      ctx.addIssue({ code: 'custom', path: ['options'], message: `is required for ${field.type} fields` });
    }
    if (!needsOptions && field.options) {
      ctx.addIssue({
        code: 'custom',
        path: ['options'],
        message: `is only allowed for select and multi_select fields`,
      });
    }
    if (field.options && new Set(field.options).size !== field.options.length) {
      ctx.addIssue({ code: 'custom', path: ['options'], message: 'must not repeat a value' });
    }
  });

export type FieldDefinition = z.infer<typeof fieldDefinitionSchema>;

export const duplicateDetectionSchema = z
  .strictObject({
    fields: z.array(z.string().min(1).max(64)).min(1).max(10).default(['name']),
    match: z.enum(['any', 'all']).default('any'),
    case_insensitive: z.boolean().default(true),
  })
  .meta({ id: 'DuplicateDetection' });

export type DuplicateDetection = z.infer<typeof duplicateDetectionSchema>;
export const DEFAULT_DUPLICATE_DETECTION: DuplicateDetection = {
  fields: ['name'],
  match: 'any',
  case_insensitive: true,
};

const stageInput = z.strictObject({ name: z.string().trim().min(1).max(200) });
const statusInput = z.strictObject({ name: z.string().trim().min(1).max(200) });

export const createPipelineBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  stages: z.array(stageInput).min(1).max(100),
  statuses: z.array(statusInput).max(100).default([]),
  fields: z.array(fieldDefinitionSchema).max(100).default([]),
  duplicate_detection: duplicateDetectionSchema.optional(),
});

/**
 * PATCH adds stages, statuses and fields; an entry naming an existing stage/status id renames it, and a
 * field identical to an existing one is accepted unchanged (so a client may send the full list back).
 */
export const updatePipelineBody = z.strictObject({
  name: z.string().trim().min(1).max(200).optional(),
  stages: z
    .array(stageInput.extend({ stage_id: z.string().optional() }))
    .max(100)
    .optional(),
  statuses: z
    .array(statusInput.extend({ status_id: z.string().optional() }))
    .max(100)
    .optional(),
  fields: z.array(fieldDefinitionSchema).max(100).optional(),
  duplicate_detection: duplicateDetectionSchema.optional(),
});

export const pipelineSchema = z
  .object({
    pipeline_id: z.string(),
    name: z.string(),
    stages: z.array(
      z.object({
        stage_id: z.string(),
        name: z.string(),
        position: z.number().int().min(0).max(99).describe('0 for the first stage').meta({ example: 0 }),
      }),
    ),
    statuses: z.array(z.object({ status_id: z.string(), name: z.string() })),
    fields: z.array(
      z.object({
        name: z.string(),
        type: z.enum(FIELD_TYPES),
        required: z.boolean(),
        options: z.array(z.string()).optional(),
      }),
    ),
    duplicate_detection: z.object({
      fields: z.array(z.string()),
      match: z.enum(['any', 'all']),
      case_insensitive: z.boolean(),
    }),
  })
  .meta({
    id: 'Pipeline',
    example: {
      pipeline_id: 'pip_6740b7a1c2d3e4f5a6b7c8d9',
      name: 'Sales',
      stages: [
        { stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d1', name: 'Lead', position: 0 },
        { stage_id: 'stg_6740b7a1c2d3e4f5a6b7c8d2', name: 'Won', position: 1 },
      ],
      statuses: [{ status_id: 'sts_6740b7a1c2d3e4f5a6b7c8d3', name: 'Open' }],
      fields: [{ name: 'deal_value', type: 'number', required: false }],
      duplicate_detection: { fields: ['name'], match: 'any', case_insensitive: true },
    },
  });

export type PipelineResponse = z.infer<typeof pipelineSchema>;

export interface StageDoc {
  stage_id: string;
  name: string;
  position: number;
}

export interface StatusDoc {
  status_id: string;
  name: string;
}

/** A pipeline as stored in `pipelines` (the pipelines repository is the only code that reads or writes it). */
export interface PipelineDoc {
  _id: string;
  company_id: string;
  name: string;
  stages: StageDoc[];
  statuses: StatusDoc[];
  fields: FieldDefinition[];
  duplicate_detection: DuplicateDetection;
  /** Bumped on every change; caches keyed by it (e.g. compiled metadata schemas) never go stale. */
  revision: number;
  created_at: Date;
  updated_at: Date;
}
