import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { admin, createTenant, expectProblem, ext, type Tenant } from '../helpers/fixtures.js';

let t: TestApp;
let tenant: Tenant;
beforeAll(async () => {
  t = await buildTestApp();
  tenant = await createTenant(t.app);
});
afterAll(async () => t?.close());

const pipelineBody = (fields: unknown[], extra: Record<string, unknown> = {}) => ({
  name: 'P',
  stages: [{ name: 'A' }],
  statuses: [{ name: 'S' }],
  fields,
  ...extra,
});
const paths = (body: { errors: Array<{ path: string }> }) => body.errors.map((error) => error.path);

describe('admin API', () => {
  it('refuses a missing or wrong admin token with 401', async () => {
    expectProblem(
      await t.app.inject({ method: 'POST', url: '/v1/admin/companies', payload: { name: 'x' } }),
      401,
      'unauthorized',
    );
    const wrong = await t.app.inject({
      method: 'POST',
      url: '/v1/admin/companies',
      headers: { authorization: 'Bearer nope-nope-nope-nope' },
      payload: { name: 'x' },
    });
    expectProblem(wrong, 401, 'unauthorized');
  });

  it('answers 404 for an unknown company', async () => {
    expectProblem(
      await admin(t.app, 'POST', '/companies/cmp_000000000000000000000000/users', { name: 'a', email: 'a@b.co' }),
      404,
      'not_found',
    );
    expectProblem(await admin(t.app, 'POST', '/companies/nonsense/pipelines', pipelineBody([])), 404, 'not_found');
    expectProblem(await admin(t.app, 'GET', '/companies/nonsense/api-keys'), 404, 'not_found');
    expectProblem(await admin(t.app, 'PATCH', '/companies/nonsense', { name: 'x' }), 404, 'not_found');
  });

  it('creates a company, user and pipeline in the documented shapes', async () => {
    const company = (await admin(t.app, 'POST', '/companies', { name: 'Shape Co' }, 201)).json();
    expect(company).toEqual({
      company_id: expect.any(String),
      name: 'Shape Co',
      subscription_status: 'active',
      created_at: expect.stringMatching(/\.\d{3}Z$/),
    });
    const user = (
      await admin(t.app, 'POST', `/companies/${company.company_id}/users`, { name: 'U', email: 'U@Example.com' }, 201)
    ).json();
    expect(user).toEqual({ user_id: expect.any(String), name: 'U', email: 'U@Example.com' });
    expectProblem(
      await admin(t.app, 'POST', `/companies/${company.company_id}/users`, { name: 'U2', email: 'u@EXAMPLE.com' }),
      400,
      'validation_failed',
    );
    const pipeline = (
      await admin(
        t.app,
        'POST',
        `/companies/${company.company_id}/pipelines`,
        pipelineBody([{ name: 'size', type: 'number' }]),
        201,
      )
    ).json();
    expect(pipeline).toEqual({
      pipeline_id: expect.any(String),
      name: 'P',
      stages: [{ stage_id: expect.any(String), name: 'A', position: 0 }],
      statuses: [{ status_id: expect.any(String), name: 'S' }],
      fields: [{ name: 'size', type: 'number', required: false }],
      duplicate_detection: { fields: ['name'], match: 'any', case_insensitive: true },
    });
  });

  it('rejects bad custom field types and options', async () => {
    const body = expectProblem(
      await admin(
        t.app,
        'POST',
        `/companies/${tenant.companyId}/pipelines`,
        pipelineBody([
          { name: 'a', type: 'currency' },
          { name: 'b', type: 'select' },
          { name: 'c', type: 'text', options: ['x'] },
        ]),
      ),
      400,
      'validation_failed',
    );
    expect(paths(body)).toEqual(expect.arrayContaining(['fields.0.type', 'fields.1.options', 'fields.2.options']));
  });

  it.each([
    'name',
    'status',
    'version',
    'item_id',
    '$where',
    '_secret',
    'a.b',
    '__proto__',
    'constructor',
    'prototype',
  ])('rejects the reserved or unsafe field name %s', async (name) => {
    const body = expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/pipelines`, pipelineBody([{ name, type: 'text' }])),
      400,
      'validation_failed',
    );
    expect(paths(body)).toContain('fields.0.name');
  });

  it('rejects duplicate field names and duplicate detection on unknown fields', async () => {
    const body = expectProblem(
      await admin(
        t.app,
        'POST',
        `/companies/${tenant.companyId}/pipelines`,
        pipelineBody(
          [
            { name: 'x', type: 'text' },
            { name: 'x', type: 'number' },
          ],
          { duplicate_detection: { fields: ['nope'], match: 'all' } },
        ),
      ),
      400,
      'validation_failed',
    );
    expect(paths(body)).toEqual(expect.arrayContaining(['fields.1.name', 'duplicate_detection.fields.0']));
  });

  it('PATCH adds stages, statuses and fields and renames, visible to integrators', async () => {
    const patched = (
      await admin(
        t.app,
        'PATCH',
        `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`,
        {
          name: 'Sales v2',
          stages: [{ name: 'Lost' }, { stage_id: tenant.stageIds[0], name: 'New lead' }],
          statuses: [{ name: 'Paused' }],
          fields: [{ name: 'website', type: 'url' }],
        },
        200,
      )
    ).json();
    expect(patched.name).toBe('Sales v2');
    expect(patched.stages.map((stage: { name: string }) => stage.name)).toEqual([
      'New lead',
      'Qualified',
      'Won',
      'Lost',
    ]);
    expect(patched.statuses).toHaveLength(3);
    expect(patched.fields.map((field: { name: string }) => field.name)).toContain('website');
    const seen = (await ext(t.app, tenant.key, 'GET', `/pipelines/${tenant.pipelineId}`)).json();
    expect(seen).toEqual(patched);
    const changeType = await admin(t.app, 'PATCH', `/companies/${tenant.companyId}/pipelines/${tenant.pipelineId}`, {
      fields: [{ name: 'website', type: 'number' }],
    });
    expectProblem(changeType, 400, 'validation_failed');
  });

  it('creates keys with all five scopes by default and validates created_by', async () => {
    const created = (
      await admin(
        t.app,
        'POST',
        `/companies/${tenant.companyId}/api-keys`,
        { name: 'k', created_by: tenant.userId },
        201,
      )
    ).json();
    expect(created.key).toMatch(/^prk_[A-Za-z0-9_-]{43}$/);
    expect(created.scopes.sort()).toEqual(['hooks:manage', 'items:read', 'items:write', 'tasks:read', 'tasks:write']);
    const other = await createTenant(t.app);
    expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/api-keys`, { name: 'k', created_by: other.userId }),
      400,
      'validation_failed',
    );
    expectProblem(
      await admin(t.app, 'POST', `/companies/${tenant.companyId}/api-keys`, {
        name: 'k',
        created_by: tenant.userId,
        scopes: ['items:delete'],
      }),
      400,
      'validation_failed',
    );
    expectProblem(
      await admin(t.app, 'DELETE', `/companies/${other.companyId}/api-keys/${created.key_id}`),
      404,
      'not_found',
    );
  });
});

describe('Pipelines API', () => {
  it('pages the list with limit and cursor', async () => {
    const own = await createTenant(t.app);
    const second = (await admin(t.app, 'POST', `/companies/${own.companyId}/pipelines`, pipelineBody([]), 201)).json();
    expectProblem(await ext(t.app, own.key, 'GET', '/pipelines?limit=201'), 400, 'validation_failed');
    const page = await ext(t.app, own.key, 'GET', '/pipelines?limit=1');
    expect(page.json().map((pipeline: { pipeline_id: string }) => pipeline.pipeline_id)).toEqual([own.pipelineId]);
    const rest = await ext(t.app, own.key, 'GET', `/pipelines?limit=1&cursor=${String(page.headers['x-next-cursor'])}`);
    expect(rest.json().map((pipeline: { pipeline_id: string }) => pipeline.pipeline_id)).toEqual([second.pipeline_id]);
  });

  it('lists only the caller company pipelines and hides other tenants', async () => {
    const other = await createTenant(t.app);
    const list = (await ext(t.app, tenant.key, 'GET', '/pipelines')).json();
    expect(list.map((pipeline: { pipeline_id: string }) => pipeline.pipeline_id)).toEqual([tenant.pipelineId]);
    expectProblem(await ext(t.app, tenant.key, 'GET', `/pipelines/${other.pipelineId}`), 404, 'not_found');
    expectProblem(await ext(t.app, tenant.key, 'GET', '/pipelines/garbage'), 404, 'not_found');
  });
});
