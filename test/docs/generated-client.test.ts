import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, type Tenant } from '../helpers/fixtures.js';

/**
 * What an integrator does: generate types from the served document with openapi-typescript, write a
 * client with openapi-fetch that names operations by their operationId, type-check it, call the API.
 */
const CLIENT = `import createClient from 'openapi-fetch';
import type { operations, paths } from './api.js';

type Query<Id extends keyof operations> = NonNullable<operations[Id]['parameters']['query']>;
type Body<Id extends keyof operations> = NonNullable<operations[Id]['requestBody']>['content']['application/json'];

export function connect(baseUrl: string, apiKey: string) {
  const client = createClient<paths>({ baseUrl, headers: { 'x-api-key': apiKey } });
  return {
    listItems: (query: Query<'listItems'> = {}) => client.GET('/v1/ext/items', { params: { query } }),
    createItem: (body: Body<'createItem'>) => client.POST('/v1/ext/items', { body }),
    createTask: (body: Body<'createTask'>) => client.POST('/v1/ext/tasks', { body }),
    listTasks: (query: Query<'listTasks'> = {}) => client.GET('/v1/ext/tasks', { params: { query } }),
  };
}

// Type-level checks on the generated types: what a caller gets back, and what it may not send.
export async function checks(api: ReturnType<typeof connect>) {
  const { data: task, error } = await api.createTask({ title: 'Typed', due_at: '2030-01-01T10:00:00Z' });
  if (task) {
    const title: string = task.title;
    const minutes: number | null = task.duration_minutes;
    void [title, minutes];
  }
  if (error) {
    const code: string = error.code;
    void code;
  }
  // @ts-expect-error the document declares no such field, so the generated body type refuses it
  await api.createTask({ title: 'x', due_at: '2030-01-01T10:00:00Z', colour: 'red' });
}
`;

const root = join(import.meta.dirname, '../..');
const DOCS_WITH_CLIENT_EXAMPLES = ['docs/pagination.md', 'docs/api-reference.md'];

let t: TestApp;
let tenant: Tenant;
let baseUrl: string;
let dir: string;
beforeAll(async () => {
  t = await buildTestApp();
  tenant = await createTenant(t.app);
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  dir = mkdtempSync(join(tmpdir(), 'generated-client-'));
  // The generated client imports openapi-fetch like any project would: from node_modules.
  symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a client generated from the served document', () => {
  it('type-checks, and calls listItems and createTask by their operationIds over HTTP', async () => {
    const ast = await openapiTS(new URL('/v1/ext/openapi.json', baseUrl));
    writeFileSync(join(dir, 'api.ts'), astToString(ast));
    writeFileSync(join(dir, 'client.ts'), CLIENT);
    // The docs' openapi-fetch examples are type-checked too, against types generated as they say (api.d.ts).
    writeFileSync(join(dir, 'api.d.ts'), astToString(ast));
    const snippets = DOCS_WITH_CLIENT_EXAMPLES.flatMap((page) =>
      [...readFileSync(join(root, page), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)]
        .map((match) => match[1] ?? '')
        .filter((code) => code.includes("from 'openapi-fetch'"))
        .map((code, index) => {
          const file = join(dir, `${page.replace(/\W/g, '-')}-${index}.ts`);
          writeFileSync(file, code);
          return file;
        }),
    );
    expect(snippets.length).toBe(DOCS_WITH_CLIENT_EXAMPLES.length);

    const program = ts.createProgram([join(dir, 'client.ts'), ...snippets], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      skipLibCheck: true,
      types: ['node'],
    });
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    expect(diagnostics).toEqual([]);

    const { connect } = (await import(pathToFileURL(join(dir, 'client.ts')).href)) as {
      connect: (
        baseUrl: string,
        key: string,
      ) => Record<'createTask' | 'createItem' | 'listItems', (arg?: unknown) => Promise<any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
    };
    const api = connect(baseUrl, tenant.key);

    const created = await api.createTask({ title: 'Call the buyer', due_at: '2030-01-01T10:00:00Z' });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ title: 'Call the buyer', due_at: '2030-01-01T10:00:00.000Z' });

    await api.createItem({ name: 'First', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] });
    await api.createItem({ name: 'Second', pipeline_id: tenant.pipelineId, stage_id: tenant.stageIds[0] });
    const firstPage = await api.listItems({ limit: 1 });
    expect(firstPage.data.map((item: { name: string }) => item.name)).toEqual(['First']);
    const cursor = firstPage.response.headers.get('x-next-cursor');
    expect(cursor).toEqual(expect.any(String));
    const secondPage = await api.listItems({ limit: 1, cursor });
    expect(secondPage.data.map((item: { name: string }) => item.name)).toEqual(['Second']);
    expect(secondPage.response.headers.get('x-next-cursor')).toBeNull();

    const refused = await api.createTask({ title: '', due_at: 'soon' });
    expect(refused.response.status).toBe(400);
    expect(refused.error).toMatchObject({ code: 'validation_failed', type: '/docs/errors#validation_failed' });
    expect(refused.error.errors.map((problem: { path: string }) => problem.path).sort()).toEqual(['due_at', 'title']);
    // About 5 s on an idle machine, most of it tsc loading the DOM library openapi-fetch's types use.
  }, 120_000);
});
