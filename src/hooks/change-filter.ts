import { z } from 'zod';
import { isIsoTimestamp } from '../shared/time.js';
import type { Changes, EventType } from '../contracts/envelope.js';
import type { FieldProblem } from '../shared/errors.js';

/**
 * `filter.changes` (DECISIONS.md section 13.2): an `*.updated` event passes when its own `changes` has one
 * of the fields, with the given `from`/`to` when those are given. Judged in memory from the envelope, so
 * the fan-out reads nothing more per event. Stored as a list (field names are custom-field names chosen by
 * users, so they are never MongoDB keys); shown as an object keyed by field.
 */
export interface ChangeCondition {
  field: string;
  from?: unknown;
  to?: unknown;
}

/** At most this many fields in one hook's `filter.changes`. */
export const MAX_CHANGE_FIELDS = 20;

/** What a subscriber writes: `{ "<field>": {} | { "from"?: v, "to"?: v } }`. */
export type ChangesFilterInput = Record<string, { from?: unknown; to?: unknown }>;

/** The event types this filter judges; every other type passes it unchanged. */
export function judgedByChanges(type: string): boolean {
  return type.endsWith('.updated');
}

const same = (a: unknown, b: unknown): boolean => a === b || JSON.stringify(a) === JSON.stringify(b);

/** Whether an event passes the conditions (none: it passes). */
export function passesChangeFilter(
  conditions: readonly ChangeCondition[] | undefined,
  event: { type: string; changes?: Changes },
): boolean {
  if (!conditions?.length || !judgedByChanges(event.type)) return true;
  const changes = event.changes;
  if (!changes) return false;
  return conditions.some((condition) => {
    if (!Object.hasOwn(changes, condition.field)) return false;
    const change = changes[condition.field]!;
    if ('from' in condition && !same(change.from, condition.from)) return false;
    if ('to' in condition && !same(change.to, condition.to)) return false;
    return true;
  });
}

export function conditionsFromInput(input: ChangesFilterInput): ChangeCondition[] {
  return Object.entries(input).map(([field, values]) => ({
    field,
    ...('from' in values ? { from: values.from } : {}),
    ...('to' in values ? { to: values.to } : {}),
  }));
}

export function conditionsToOutput(conditions: readonly ChangeCondition[]): ChangesFilterInput {
  const output: ChangesFilterInput = {};
  for (const { field, ...values } of conditions) output[field] = { ...values };
  return output;
}

/** The value a field of `changes` may hold, and its normal form (timestamps in UTC with milliseconds). */
export type FieldValueSchema = z.ZodType;

/** A timestamp a task's `changes` carries (`due_at`, `completed_at`): any offset in, UTC with ms kept. */
export const changeTimestamp = z
  .string()
  .refine(isIsoTimestamp, 'expected an ISO 8601 timestamp')
  .transform((value) => new Date(value).toISOString());

/**
 * The fields a hook's `changes` may name, each with the schemas its values may match (a name that is a
 * field of tasks and of items, or a custom field of several pipelines, may take any of their types).
 */
export type KnownChangeFields = Map<string, FieldValueSchema[]>;

/**
 * Problems with a `filter.changes` against the fields the hook's `*.updated` types can report: a name that
 * is no such field, a `from`/`to` its field cannot hold. Returns the conditions in their stored (normal) form.
 */
export function judgeChangeFilter(
  input: ChangesFilterInput,
  known: KnownChangeFields,
  types: readonly (EventType | '*')[],
): { conditions: ChangeCondition[]; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const conditions: ChangeCondition[] = [];
  if (!types.some((type) => type === '*' || judgedByChanges(type)))
    return {
      conditions,
      problems: [
        {
          path: 'filter.changes',
          message: 'only judges *.updated events: subscribe to task.updated, item.updated or *',
        },
      ],
    };
  for (const condition of conditionsFromInput(input)) {
    const path = `filter.changes.${condition.field}`;
    const schemas = known.get(condition.field);
    if (!schemas) {
      problems.push({ path, message: 'is not a field the subscribed *.updated events report in changes' });
      continue;
    }
    const stored: ChangeCondition = { field: condition.field };
    for (const side of ['from', 'to'] as const) {
      if (!(side in condition)) continue;
      const parsed = schemas.map((schema) => schema.safeParse(condition[side])).find((result) => result.success);
      if (!parsed) problems.push({ path: `${path}.${side}`, message: 'is not a value this field can hold' });
      else stored[side] = parsed.data;
    }
    conditions.push(stored);
  }
  return { conditions, problems };
}
