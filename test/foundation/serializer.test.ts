import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { itemSchema } from '../../src/contracts/items.js';
import { taskSchema } from '../../src/contracts/tasks.js';
import { zodResponseSerializerCompiler } from '../../src/http/serializer.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createItem, createTask, createTenant, ext } from '../helpers/fixtures.js';

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
        expect(serialize(schema, example), `${String(route.method)} ${route.url}`).toEqual(reference(schema, example));
        compared++;
      }
    }
    expect(compared).toBeGreaterThanOrEqual(10);
  });

  it('writes only declared properties, so internal fields of a document never leave', () => {
    const example = taskSchema.meta()?.example as Record<string, unknown>;
    const leaky = {
      ...example,
      _id: 'tsk_x',
      company_id: 'cmp_secret',
      pending_events: [{ event_id: 'evt_1' }],
      overdue_fired_dues: [],
    };
    const written = serialize(taskSchema, leaky);
    expect(written).toEqual(reference(taskSchema, leaky));
    for (const internal of ['_id', 'company_id', 'pending_events', 'overdue_fired_dues'])
      expect(written).not.toHaveProperty(internal);
  });

  it("keeps an item's custom fields (additional properties) with nulls, numbers, booleans and lists", () => {
    const example = itemSchema.meta()?.example as Record<string, unknown>;
    const item = {
      ...example,
      status: null,
      contact_id: null,
      deal_value: 12.5,
      won: false,
      tags: ['a', 'b'],
      region: null,
      note: 'x',
    };
    expect(serialize(itemSchema, item)).toEqual(reference(itemSchema, item));
    expect(serialize(itemSchema, item)).toMatchObject({
      deal_value: 12.5,
      won: false,
      tags: ['a', 'b'],
      region: null,
      status: null,
    });
  });

  it('refuses unions of objects at startup, and writes a nullable object', () => {
    const union = z.union([z.object({ a: z.string() }), z.object({ b: z.number() })]);
    expect(() => zodResponseSerializerCompiler({ schema: union })).toThrow(/unions of objects/);
    const nullable = z.object({ conditions: z.object({ priority: z.string() }).nullable() });
    for (const data of [{ conditions: null }, { conditions: { priority: 'high', extra: 1 } }]) {
      expect(serialize(nullable, data)).toEqual(reference(nullable, data));
    }
  });

  it('answers every route with a body its own response schema accepts unchanged (real data, nulls included)', async () => {
    const tenant = await createTenant(t.app);
    const item = await createItem(t.app, tenant, { contact_id: null });
    await createTask(t.app, tenant, { item_id: item.item_id, description: null });
    const hook = (
      await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: 'https://example.com/hook', event: '*' })
    ).json();
    const company = `/companies/${tenant.companyId}`;
    await admin(
      t.app,
      'POST',
      `${company}/automations`,
      {
        name: 'rule',
        trigger: 'task.completed',
        actions: [{ type: 'webhook', url: 'https://example.com/a' }],
      },
      201,
    );
    const calls: Array<{ api: 'ext' | 'admin'; url: string; route: string }> = [
      { api: 'ext', url: '/items', route: '/v1/ext/items' },
      { api: 'ext', url: `/items/${item.item_id}`, route: '/v1/ext/items/:item_id' },
      { api: 'ext', url: '/tasks', route: '/v1/ext/tasks' },
      { api: 'ext', url: '/pipelines', route: '/v1/ext/pipelines' },
      { api: 'ext', url: `/pipelines/${tenant.pipelineId}`, route: '/v1/ext/pipelines/:pipeline_id' },
      { api: 'ext', url: '/hooks', route: '/v1/ext/hooks' },
      { api: 'ext', url: `/hooks/${hook.hook_id}/deliveries`, route: '/v1/ext/hooks/:hook_id/deliveries' },
      { api: 'admin', url: company, route: '/v1/admin/companies/:company_id' },
      { api: 'admin', url: `${company}/users`, route: '/v1/admin/companies/:company_id/users' },
      { api: 'admin', url: `${company}/api-keys`, route: '/v1/admin/companies/:company_id/api-keys' },
      { api: 'admin', url: `${company}/pipelines`, route: '/v1/admin/companies/:company_id/pipelines' },
      { api: 'admin', url: `${company}/automations`, route: '/v1/admin/companies/:company_id/automations' },
    ];
    for (const call of calls) {
      const response =
        call.api === 'ext'
          ? await ext(t.app, tenant.key, 'GET', call.url)
          : await admin(t.app, 'GET', call.url, undefined, 200);
      expect(response.statusCode, call.url).toBe(200);
      const route = t.app.routeTable.find(
        (candidate) => candidate.url === call.route && [candidate.method].flat().includes('GET'),
      );
      const schema = (route?.schema?.response as Record<number, z.ZodType> | undefined)?.[200];
      expect(schema, call.route).toBeDefined();
      const body = response.json();
      expect(schema!.parse(body), call.url).toEqual(body);
    }
  });

  it('escapes strings as JSON does', () => {
    const example = itemSchema.meta()?.example as Record<string, unknown>;
    const item = { ...example, name: 'quote " backslash \\ newline \n emoji 🚀 nul \u0000 </script>' };
    expect(serialize(itemSchema, item).name).toBe(item.name);
  });
});
