import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, errorTypeUri } from '../../src/http/error-reference.js';
import { OPERATION_IDS, openApiPath } from '../../src/http/operation-ids.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, ext, expectProblem, type Tenant } from '../helpers/fixtures.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let t: TestApp;
let tenant: Tenant;
let document: Json;
let adminDocument: Json;
beforeAll(async () => {
  t = await buildTestApp();
  tenant = await createTenant(t.app);
  document = (await t.app.inject({ method: 'GET', url: '/v1/ext/openapi.json' })).json();
  adminDocument = (await t.app.inject({ method: 'GET', url: '/v1/admin/openapi.json' })).json();
});
afterAll(async () => t?.close());

const root = join(import.meta.dirname, '../..');

function operations(): Array<{ method: string; path: string; operation: Json }> {
  return Object.entries<Json>(document.paths).flatMap(([path, byMethod]) =>
    Object.entries<Json>(byMethod).map(([method, operation]) => ({ method: method.toUpperCase(), path, operation })),
  );
}

/** Every schema object in the document, with where it is and the nodes that hold it (nearest first). */
function schemasIn(
  node: unknown,
  at = '#',
  holders: Json[] = [],
  found: Array<{ at: string; schema: Json; holders: Json[] }> = [],
) {
  if (Array.isArray(node)) node.forEach((child, index) => schemasIn(child, `${at}/${index}`, holders, found));
  else if (node && typeof node === 'object') {
    if ((node as Json).type) found.push({ at, schema: node, holders });
    for (const [key, child] of Object.entries(node)) schemasIn(child, `${at}/${key}`, [node, ...holders], found);
  }
  return found;
}

describe('the reference generates good SDKs', () => {
  it('gives every operation a verb-first operationId from OPERATION_IDS, none repeated', () => {
    const ids = operations().map(({ method, path, operation }) => {
      expect(operation.operationId, `${method} ${path} needs a row in src/http/operation-ids.ts`).toBe(
        OPERATION_IDS[`${method} ${path}`],
      );
      return operation.operationId as string;
    });
    expect(ids).toContain('listItems');
    expect(ids).toContain('createTask');
    expect(ids.filter((id, index) => ids.indexOf(id) !== index)).toEqual([]);
    for (const id of ids)
      expect(id).toMatch(
        /^(list|get|create|update|delete|check|upsert|batch|redeliver|recover|rotate|test|export)[A-Z]/,
      );
  });

  it('has an operationId row for every admin route too, all distinct', () => {
    const missing = t.app.routeTable
      .filter((route) => route.url.startsWith('/v1/admin/') && !route.url.includes('*'))
      .flatMap((route) =>
        [route.method]
          .flat()
          .filter((method) => method !== 'HEAD')
          .map((method) => `${method} ${openApiPath(route.url)}`),
      )
      .filter((key) => !OPERATION_IDS[key]);
    expect(missing).toEqual([]);
    const ids = Object.values(OPERATION_IDS);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('bounds every integer for real and shows an example or default (the external and the admin document)', () => {
    const integers = [...schemasIn(document), ...schemasIn(adminDocument, 'admin#')].filter(
      ({ schema }) => schema.type === 'integer',
    );
    expect(integers.length).toBeGreaterThan(10);
    const unbounded = integers
      .filter(
        ({ schema }) =>
          typeof schema.minimum !== 'number' ||
          typeof schema.maximum !== 'number' ||
          Math.abs(schema.minimum) >= 2 ** 31 ||
          Math.abs(schema.maximum) >= 2 ** 31,
      )
      .map(({ at }) => at);
    expect(unbounded).toEqual([]);
    expect(JSON.stringify(document)).not.toContain('9007199254740991');
    expect(JSON.stringify(adminDocument)).not.toContain('9007199254740991');
    // An integer's example sits on the schema or on what holds it: its nullable wrapper, header or parameter.
    const withoutExample = integers
      .filter(({ schema, holders }) => {
        if (schema.example !== undefined || schema.default !== undefined) return false;
        return holders[0]?.example === undefined;
      })
      .map(({ at }) => at);
    expect(withoutExample).toEqual([]);
  });

  it('documents paging on every list: Link and x-next-cursor headers with examples', () => {
    const lists = operations().filter(
      ({ method, operation }) =>
        method === 'GET' && operation.responses['200']?.content?.['application/json']?.schema?.type === 'array',
    );
    expect(lists.map(({ operation }) => operation.operationId)).toEqual(
      expect.arrayContaining(['listItems', 'listTasks']),
    );
    for (const { path, operation } of lists) {
      const headers = operation.responses['200'].headers;
      expect(headers.Link.example, path).toContain(`<${path}?`);
      expect(headers.Link.example).toContain('rel="next"');
      expect(headers['x-next-cursor'].example).toEqual(expect.any(String));
      // Generators type a header as present only when it says `required`: the feed's cursor is on every
      // answer, another list's is absent on its last page.
      const always = path === '/v1/ext/events';
      expect(headers['x-next-cursor'].required, path).toBe(always);
      expect(headers.Link.required, path).toBe(always);
    }
  });

  it('types Problem.code as the enum of codes, and declares the metadata.<field>[op] filters of listItems', () => {
    expect(document.components.schemas.Problem.properties.code.enum).toEqual(Object.keys(ERROR_CATALOGUE));
    const metadata = document.paths['/v1/ext/items'].get.parameters.find(
      (parameter: Json) => parameter.name === 'metadata',
    );
    expect(metadata).toMatchObject({ in: 'query', style: 'form', explode: true });
    const [pattern] = Object.keys(metadata.schema.patternProperties);
    const accepts = new RegExp(pattern!);
    expect(
      ['metadata.deal_value[gte]', 'metadata.industry', 'metadata.deal_value[in]'].every((n) => accepts.test(n)),
    ).toBe(true);
    expect(['metadata.deal_value[near]', 'deal_value', 'metadata.'].some((n) => accepts.test(n))).toBe(false);
  });

  it('gives every error response an example body; 400 lists errors[], 429 carries its headers', () => {
    for (const { method, path, operation } of operations()) {
      for (const [status, response] of Object.entries<Json>(operation.responses)) {
        if (Number(status) < 400) continue;
        const examples: Json = response.content['application/problem+json'].examples;
        expect(Object.keys(examples ?? {}).length, `${method} ${path} ${status}`).toBeGreaterThan(0);
        for (const [code, example] of Object.entries<Json>(examples)) {
          expect(example.value).toMatchObject({ status: Number(status), code, type: `/docs/errors#${code}` });
        }
      }
      expect(
        operation.responses['400'].content['application/problem+json'].examples.validation_failed.value.errors,
      ).toEqual(expect.arrayContaining([{ path: expect.any(String), message: expect.any(String) }]));
      const tooMany = operation.responses['429'];
      expect(tooMany.content['application/problem+json'].examples.rate_limited.value.code).toBe('rate_limited');
      expect(Object.keys(tooMany.headers)).toEqual(
        expect.arrayContaining([
          'Retry-After',
          'RateLimit-Limit',
          'RateLimit-Remaining',
          'RateLimit-Reset',
          'RateLimit-Policy',
        ]),
      );
      expect(tooMany.headers['RateLimit-Remaining'].example).toBe(0);
    }
  });
});

describe('what the reference pages render', () => {
  it('describes every parameter of both documents (the renderer otherwise shows a generic line)', () => {
    const documents: Array<[string, Json]> = [
      ['ext', document],
      ['admin', adminDocument],
    ];
    const undescribed = documents.flatMap(([name, doc]) =>
      Object.entries<Json>(doc.paths).flatMap(([path, byMethod]) =>
        Object.entries<Json>(byMethod).flatMap(([method, operation]) =>
          (operation.parameters ?? [])
            .filter((parameter: Json) => !parameter.description)
            .map((parameter: Json) => `${name} ${method} ${path} ${parameter.in}:${parameter.name}`),
        ),
      ),
    );
    expect(undescribed).toEqual([]);
  });

  it('names admin operations as a reader says them, and each document links to the other page', () => {
    const summaries = Object.values<Json>(adminDocument.paths).flatMap((byMethod) =>
      Object.values<Json>(byMethod).map((operation) => operation.summary as string),
    );
    expect(summaries).toContain('Create a user');
    expect(summaries).toContain('Create an API key');
    expect(summaries.filter((summary) => / an [^aeioAEIO]/.test(summary))).toEqual([]); // "an user" was one
    expect(document.info.description).toContain('(/docs/admin)');
    expect(adminDocument.info.description).toContain('(/docs)');
  });
});

describe('the admin reference', () => {
  it('gives every admin error response an example body per code, the type resolving to /docs/errors', () => {
    const admin = adminDocument;
    let checked = 0;
    for (const [path, byMethod] of Object.entries<Json>(admin.paths))
      for (const [method, operation] of Object.entries<Json>(byMethod))
        for (const [status, response] of Object.entries<Json>(operation.responses)) {
          if (Number(status) < 400) continue;
          const examples: Json = response.content['application/problem+json'].examples ?? {};
          expect(Object.keys(examples).length, `${method} ${path} ${status}`).toBeGreaterThan(0);
          for (const [code, example] of Object.entries<Json>(examples))
            expect(example.value).toMatchObject({ status: Number(status), code, type: `/docs/errors#${code}` });
          checked++;
        }
    expect(checked).toBeGreaterThan(30);
  });
});

/** Every example value in a document: `example`, JSON Schema `examples` arrays and OpenAPI `examples` maps. */
function examplesIn(node: unknown, at = '#', found: Array<{ at: string; value: unknown }> = []) {
  if (Array.isArray(node)) node.forEach((child, index) => examplesIn(child, `${at}/${index}`, found));
  else if (node && typeof node === 'object') {
    for (const [key, child] of Object.entries<unknown>(node as Json)) {
      if (key === 'example') found.push({ at: `${at}/example`, value: child });
      else if (key === 'examples' && Array.isArray(child))
        child.forEach((value, index) => found.push({ at: `${at}/examples/${index}`, value }));
      else if (key === 'examples' && child && typeof child === 'object')
        for (const [name, entry] of Object.entries<Json>(child as Json))
          found.push({ at: `${at}/examples/${name}`, value: entry.value });
      else examplesIn(child, `${at}/${key}`, found);
    }
  }
  return found;
}

/** Problem documents anywhere inside an example (a batch result's `error`, a list of them, ...). */
function problemsIn(value: unknown, at: string, found: Array<{ at: string; problem: Json }> = []) {
  if (Array.isArray(value)) value.forEach((child, index) => problemsIn(child, `${at}/${index}`, found));
  else if (value && typeof value === 'object') {
    const candidate = value as Json;
    if (typeof candidate.code === 'string' && (typeof candidate.type === 'string' || 'title' in candidate))
      found.push({ at, problem: candidate });
    for (const [key, child] of Object.entries(candidate)) problemsIn(child, `${at}/${key}`, found);
  }
  return found;
}

describe('examples in the references', () => {
  it('give every example problem the type the service sends for its code (the external and the admin document)', () => {
    let checked = 0;
    for (const [name, doc] of [
      ['ext', document],
      ['admin', adminDocument],
    ] as const) {
      const examples = examplesIn(doc.paths).concat(examplesIn(doc.components));
      for (const { at, value } of examples) {
        // No example points at a host the service does not serve (a leftover such as https://docs.example/...).
        expect(JSON.stringify(value) ?? '', `${name} ${at}`).not.toContain('docs.example');
        for (const problem of problemsIn(value, at)) {
          expect(Object.keys(ERROR_CATALOGUE), `${name} ${problem.at}: unknown code`).toContain(problem.problem.code);
          expect(problem.problem.type, `${name} ${problem.at}`).toBe(errorTypeUri(problem.problem.code));
          expect(problem.problem.status, `${name} ${problem.at}`).toBe(ERROR_CATALOGUE[problem.problem.code]?.status);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(100);
  });
});

describe('error reference', () => {
  it('answers with a type that resolves to the code on the served /docs/errors page', async () => {
    const body = expectProblem(await ext(t.app, tenant.key, 'POST', '/tasks', { title: '' }), 400, 'validation_failed');
    expect(body.type).toBe('/docs/errors#validation_failed');
    const target = new URL(body.type, 'http://api.example/v1/ext/tasks');
    const page = await t.app.inject({ method: 'GET', url: target.pathname });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    for (const code of Object.keys(ERROR_CATALOGUE)) expect(page.body).toContain(`id="${code}"`);
  });

  it('lists every code thrown in src/, and docs/errors.md has a heading for each', () => {
    const sources: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith('.ts')) sources.push(readFileSync(path, 'utf8'));
      }
    };
    walk(join(root, 'src'));
    const thrown = new Set(
      sources.flatMap((source) =>
        [...source.matchAll(/(?:AppError\(|super\()\s*(?:\d{3}|[\w.]+),\s*'([a-z_]+)'/g)].map(
          (match) => match[1] ?? '',
        ),
      ),
    );
    expect(thrown.size).toBeGreaterThan(10);
    expect([...thrown].filter((code) => !Object.hasOwn(ERROR_CATALOGUE, code))).toEqual([]);
    const headings = new Set(
      [...readFileSync(join(root, 'docs/errors.md'), 'utf8').matchAll(/^## (\w+)$/gm)].map((m) => m[1]),
    );
    expect(Object.keys(ERROR_CATALOGUE).filter((code) => !headings.has(code))).toEqual([]);
  });
});
