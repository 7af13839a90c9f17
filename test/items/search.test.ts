import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createItem, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
let tenant: Tenant;
let other: Tenant;
const FIELDS = [
  { name: 'deal_value', type: 'number' },
  { name: 'industry', type: 'select', options: ['software', 'retail', 'energy'] },
  { name: 'hot', type: 'boolean' },
  { name: 'close_on', type: 'date' },
  { name: 'tags', type: 'multi_select', options: ['a', 'b'] },
  { name: 'note', type: 'text' },
];
const ids: Record<string, string> = {};

beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000' });
  tenant = await createTenant(t.app, { fields: FIELDS });
  other = await createTenant(t.app, { fields: FIELDS });
  const seed = async (key: string, name: string, metadata: Record<string, unknown>) =>
    (ids[key] = (await createItem(t.app, tenant, { name, metadata })).item_id);
  await seed('acme', 'Acme renewal', { deal_value: 100, industry: 'software', hot: true, close_on: '2026-12-01' });
  await seed('globex', 'Globex expansion', { deal_value: 500, industry: 'retail', tags: ['a'] });
  await seed('initech', 'Initech Renewal 2027', { deal_value: 250, industry: 'energy', hot: false, note: 'x' });
  await seed('bare', 'Acmeville pilot', {});
  await createItem(t.app, other, { name: 'Acme renewal', metadata: { deal_value: 100 } });
});
afterAll(async () => t?.close());

const list = async (query: string, who = tenant) => {
  const response = await ext(t.app, who.key, 'GET', `/items?${query}`);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<Array<{ item_id: string }>>().map((item) => item.item_id);
};
const named = (...keys: string[]) => keys.map((key) => ids[key]);
const withPipeline = (query: string) => `pipeline_id=${tenant.pipelineId}&${query}`;

describe('q on item lists', () => {
  it('finds names whose words start with every query word, case-insensitively', async () => {
    expect(await list('q=acm%20ren')).toEqual(named('acme'));
    expect(await list('q=ACME')).toEqual(named('acme', 'bare'));
    expect(await list('q=renewal')).toEqual(named('acme', 'initech'));
    expect(await list('q=2027%20ini')).toEqual(named('initech'));
    expect(await list('q=enewal')).toEqual([]);
    expect(await list('q=acme%20expansion')).toEqual([]);
    // Regex characters are never patterns.
    expect(await list('q=acme.*')).toEqual(named('acme', 'bare'));
  });

  it('refuses a query without a letter or digit (it would match every item) with 400 on q', async () => {
    for (const q of ['---', '%20', '%E2%80%8B', '.*', '', '%20%E2%80%8B-']) {
      const response = await ext(t.app, tenant.key, 'GET', `/items?q=${q}`);
      expect(expectProblem(response, 400, 'validation_failed').errors, `q=${q}`).toEqual([
        { path: 'q', message: 'expected at least one letter or digit' },
      ]);
    }
    // Next to a filter's problem, both are named.
    const both = await ext(t.app, tenant.key, 'GET', `/items?${withPipeline('q=---&metadata.nope=1')}`);
    expect(expectProblem(both, 400, 'validation_failed').errors.map((error: { path: string }) => error.path)).toEqual([
      'metadata.nope',
      'q',
    ]);
  });

  it('combines with other filters and pages with a cursor', async () => {
    expect(await list(withPipeline('q=acme&metadata.deal_value[gte]=50'))).toEqual(named('acme'));
    const first = await ext(t.app, tenant.key, 'GET', '/items?q=acme&limit=1');
    expect(first.json().map((item: { item_id: string }) => item.item_id)).toEqual(named('acme'));
    const next = await list(`q=acme&limit=1&cursor=${String(first.headers['x-next-cursor'])}`);
    expect(next).toEqual(named('bare'));
  });
});

describe('custom-field filters on item lists', () => {
  it('apply each operator, with values parsed by the field type', async () => {
    expect(await list(withPipeline('metadata.industry=retail'))).toEqual(named('globex'));
    expect(await list(withPipeline('metadata.deal_value[eq]=250'))).toEqual(named('initech'));
    expect(await list(withPipeline('metadata.deal_value[gt]=100'))).toEqual(named('globex', 'initech'));
    expect(await list(withPipeline('metadata.deal_value[gte]=100&metadata.deal_value[lt]=500'))).toEqual(
      named('acme', 'initech'),
    );
    expect(await list(withPipeline('metadata.deal_value[lte]=100'))).toEqual(named('acme'));
    expect(await list(withPipeline('metadata.industry[in]=retail,energy'))).toEqual(named('globex', 'initech'));
    expect(await list(withPipeline('metadata.industry[ne]=software'))).toEqual(named('globex', 'initech', 'bare'));
    expect(await list(withPipeline('metadata.hot=false'))).toEqual(named('initech'));
    expect(await list(withPipeline('metadata.hot[exists]=true'))).toEqual(named('acme', 'initech'));
    expect(await list(withPipeline('metadata.hot[exists]=false'))).toEqual(named('globex', 'bare'));
    expect(await list(withPipeline('metadata.close_on[gte]=2026-11-30'))).toEqual(named('acme'));
    expect(await list(withPipeline('metadata.tags=a'))).toEqual(named('globex'));
    expect(await list(withPipeline('metadata.note=x'))).toEqual(named('initech'));
  });

  it("never reach another company: another company's pipeline is not found", async () => {
    const response = await ext(
      t.app,
      other.key,
      'GET',
      `/items?pipeline_id=${tenant.pipelineId}&metadata.deal_value=100`,
    );
    expect(expectProblem(response, 400, 'validation_failed').errors[0].path).toBe('pipeline_id');
    expect(await list(`pipeline_id=${other.pipelineId}&metadata.deal_value=100`, other)).toHaveLength(1);
  });

  it('refuse an unknown field, a wrong type, an unknown operator or a missing pipeline_id with 400 naming the parameter', async () => {
    const problemPath = async (query: string) =>
      expectProblem(await ext(t.app, tenant.key, 'GET', `/items?${query}`), 400, 'validation_failed').errors.map(
        (error: { path: string }) => error.path,
      );
    expect(await problemPath(withPipeline('metadata.nope=1'))).toEqual(['metadata.nope']);
    expect(await problemPath(withPipeline('metadata.deal_value=lots'))).toEqual(['metadata.deal_value']);
    expect(await problemPath(withPipeline('metadata.deal_value[in]=1,x'))).toEqual(['metadata.deal_value[in]']);
    expect(await problemPath(withPipeline('metadata.hot=yes'))).toEqual(['metadata.hot']);
    expect(await problemPath(withPipeline('metadata.industry=gold'))).toEqual(['metadata.industry']);
    expect(await problemPath(withPipeline('metadata.close_on[gt]=soon'))).toEqual(['metadata.close_on[gt]']);
    expect(await problemPath(withPipeline('metadata.deal_value[between]=1'))).toEqual(['metadata.deal_value[between]']);
    expect(await problemPath(withPipeline('metadata.hot[gt]=true'))).toEqual(['metadata.hot[gt]']);
    expect(await problemPath(withPipeline('metadata.hot[exists]=maybe'))).toEqual(['metadata.hot[exists]']);
    expect(await problemPath('metadata.deal_value=1')).toEqual(['metadata.deal_value']);
    expect(await problemPath(withPipeline('metadata.deal_value=1&metadata.deal_value=2'))).toEqual([
      'metadata.deal_value',
    ]);
    expect(await problemPath(withPipeline('meta.deal_value=1'))).toEqual(['meta.deal_value']);
  });

  it('read a number filter in the grammar of limit: decimal digits, a sign and a fraction, nothing else', async () => {
    expect(await list(withPipeline('metadata.deal_value[gt]=-1.5&metadata.deal_value[lt]=100.25'))).toEqual(
      named('acme'),
    );
    expect(await list(withPipeline('metadata.deal_value=0250'))).toEqual(named('initech'));
    for (const value of [
      '0x10',
      '0xFA',
      '1e2',
      '2.5e2',
      '+100',
      '.5',
      '%20100',
      '100%20',
      'Infinity',
      '0b11',
      '1_000',
    ]) {
      const response = await ext(t.app, tenant.key, 'GET', `/items?${withPipeline(`metadata.deal_value=${value}`)}`);
      expect(expectProblem(response, 400, 'validation_failed').errors, value).toEqual([
        { path: 'metadata.deal_value', message: 'expected a decimal number' },
      ]);
    }
    // limit refuses the same spelling.
    expectProblem(await ext(t.app, tenant.key, 'GET', '/items?limit=0x10'), 400, 'validation_failed');
  });
});

describe('unknown query parameters on item lists', () => {
  it('are 400 naming the parameter, prototype member names included (as on every other list)', async () => {
    for (const name of ['__proto__', 'toString', 'constructor', 'hasOwnProperty', 'valueOf', 'nope']) {
      const response = await ext(t.app, tenant.key, 'GET', `/items?${name}=x`);
      expect(expectProblem(response, 400, 'validation_failed').errors, name).toEqual([
        { path: name, message: 'unknown field' },
      ]);
    }
    const tasks = await ext(t.app, tenant.key, 'GET', '/tasks?__proto__=x');
    expect(expectProblem(tasks, 400, 'validation_failed').errors[0].path).toBe('__proto__');
  });
});
