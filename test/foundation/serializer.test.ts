import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { zodResponseSerializerCompiler } from '../../src/http/serializer.js';
import { itemSchema } from '../../src/items/schemas.js';
import { taskSchema } from '../../src/tasks/schemas.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp();
});
afterAll(async () => t?.close());

const serialize = (schema: z.ZodType, data: unknown) => JSON.parse(zodResponseSerializerCompiler({ schema })(data));
/** What zod's own parse-then-stringify (the reference behaviour) writes. */
const reference = (schema: z.ZodType, data: unknown) => JSON.parse(JSON.stringify(schema.parse(data)));

/** A schema's documented example, or for an array of examples-bearing elements, a list of one. */
function exampleOf(schema: z.ZodType): unknown {
  const own = schema.meta()?.example;
  if (own !== undefined) return own;
  if (schema instanceof z.ZodArray) {
    const element = exampleOf(schema.element as z.ZodType);
    return element === undefined ? undefined : [element];
  }
  return undefined;
}

describe('response serialization (zod schemas compiled to fast-json-stringify)', () => {
  it('compiles every response schema of every route and writes each documented example as zod would', async () => {
    let compared = 0;
    for (const route of t.app.routeTable) {
      const responses = (route.schema?.response ?? {}) as Record<string, z.ZodType>;
      for (const schema of Object.values(responses)) {
        expect(() => zodResponseSerializerCompiler({ schema })).not.toThrow();
        const example = exampleOf(schema);
        if (example === undefined) continue;
        expect(serialize(schema, example), `${route.method} ${route.url}`).toEqual(reference(schema, example));
        compared++;
      }
    }
    expect(compared).toBeGreaterThanOrEqual(10);
  });

  it('writes only declared properties, so internal fields of a document never leave', () => {
    const example = taskSchema.meta()?.example as Record<string, unknown>;
    const leaky = { ...example, _id: 'tsk_x', company_id: 'cmp_secret', pending_events: [{ event_id: 'evt_1' }], overdue_fired_dues: [] };
    const written = serialize(taskSchema, leaky);
    expect(written).toEqual(reference(taskSchema, leaky));
    for (const internal of ['_id', 'company_id', 'pending_events', 'overdue_fired_dues']) expect(written).not.toHaveProperty(internal);
  });

  it("keeps an item's custom fields (additional properties) with nulls, numbers, booleans and lists", () => {
    const example = itemSchema.meta()?.example as Record<string, unknown>;
    const item = { ...example, status: null, contact_id: null, deal_value: 12.5, won: false, tags: ['a', 'b'], region: null, note: 'x' };
    expect(serialize(itemSchema, item)).toEqual(reference(itemSchema, item));
    expect(serialize(itemSchema, item)).toMatchObject({ deal_value: 12.5, won: false, tags: ['a', 'b'], region: null, status: null });
  });

  it('escapes strings as JSON does', () => {
    const example = itemSchema.meta()?.example as Record<string, unknown>;
    const item = { ...example, name: 'quote " backslash \\ newline \n emoji 🚀 nul \u0000 </script>' };
    expect(serialize(itemSchema, item).name).toBe(item.name);
  });
});
