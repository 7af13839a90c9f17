import { valueSchema } from '../contracts/custom-fields.js';
import { itemSchema } from '../contracts/items.js';
import { taskSchema } from '../contracts/tasks.js';
import { changeTimestamp, type FieldValueSchema, type KnownChangeFields } from './change-filter.js';
import type { PipelineDoc } from '../contracts/pipelines.js';
import type { HookEvent } from './repository.js';
import type { z } from 'zod';

/** Task fields a task.updated's `changes` can report (diffResources of the API shape, less what never changes). */
const TASK_UNCHANGING = new Set(['task_id', 'created_by', 'created_at', 'updated_at']);
/** Item core fields an item.updated's `changes` can report; custom fields come by name from the pipelines. */
const ITEM_UNCHANGING = new Set(['item_id', 'short_id', 'created_at', 'updated_at', 'version']);
const TIMESTAMPS = new Set(['due_at', 'completed_at']);

function entitySchemas(shape: Record<string, z.ZodType>, unchanging: Set<string>): Array<[string, FieldValueSchema]> {
  return Object.entries(shape)
    .filter(([field]) => !unchanging.has(field))
    .map(([field, schema]) => [
      field,
      TIMESTAMPS.has(field) ? (field === 'completed_at' ? changeTimestamp.nullable() : changeTimestamp) : schema,
    ]);
}

const TASK_FIELDS = entitySchemas(taskSchema.shape, TASK_UNCHANGING);
const ITEM_FIELDS = entitySchemas(itemSchema.shape, ITEM_UNCHANGING);

/**
 * The fields a hook with these types may name in `filter.changes`, with the values each may take: task
 * fields for task.updated, item core fields and the custom fields of `pipelines` (those of the company, or
 * of the filter's pipeline) for item.updated; `*` both. A custom field is null when cleared.
 */
export function knownChangeFields(types: readonly HookEvent[], pipelines: readonly PipelineDoc[]): KnownChangeFields {
  const known: KnownChangeFields = new Map();
  const add = (field: string, schema: FieldValueSchema) => known.set(field, [...(known.get(field) ?? []), schema]);
  const every = types.includes('*');
  if (every || types.includes('task.updated')) for (const [field, schema] of TASK_FIELDS) add(field, schema);
  if (every || types.includes('item.updated')) {
    for (const [field, schema] of ITEM_FIELDS) add(field, schema);
    for (const pipeline of pipelines)
      for (const field of pipeline.fields)
        if (!ITEM_FIELDS.some(([core]) => core === field.name)) add(field.name, valueSchema(field).nullable());
  }
  return known;
}
