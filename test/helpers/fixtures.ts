import { expect } from 'vitest';
import { TEST_ADMIN_TOKEN } from './app.js';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';

type Payload = Record<string, unknown>;

/** Calls the admin API and insists on the expected status. */
export async function admin(
  app: FastifyInstance,
  method: InjectOptions['method'],
  url: string,
  payload?: Payload,
  expectedStatus?: number,
) {
  const response = await app.inject({
    method,
    url: `/v1/admin${url}`,
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    ...(payload ? { payload } : {}),
  });
  if (expectedStatus !== undefined) expect(response.statusCode, response.body).toBe(expectedStatus);
  return response;
}

export interface Tenant {
  companyId: string;
  userId: string;
  pipelineId: string;
  stageIds: string[];
  statusIds: string[];
  key: string;
  keyId: string;
  /** Filled by seedResources() for routes that need an existing record. */
  itemId?: string;
  taskId?: string;
  hookId?: string;
  /** Where seedResources() points the hooks it subscribes; a loopback receiver when workers run. */
  hookBaseUrl?: string;
  /** Records a DELETE may remove without taking away what the other routes refer to. */
  spareItemId?: string;
  spareTaskId?: string;
}

export const DEFAULT_FIELDS = [
  { name: 'deal_value', type: 'number' },
  { name: 'industry', type: 'select', options: ['software', 'retail'] },
  { name: 'notes_text', type: 'text' },
];

/** A company with one user, one pipeline (three stages, two statuses, custom fields) and an API key. */
export async function createTenant(
  app: FastifyInstance,
  options: { scopes?: string[]; fields?: Payload[]; duplicate_detection?: Payload; subscription_status?: string } = {},
): Promise<Tenant> {
  const company = (
    await admin(
      app,
      'POST',
      '/companies',
      { name: 'Acme', subscription_status: options.subscription_status ?? 'active' },
      201,
    )
  ).json();
  const user = (
    await admin(
      app,
      'POST',
      `/companies/${company.company_id}/users`,
      { name: 'Ada', email: `ada-${company.company_id}@example.com` },
      201,
    )
  ).json();
  const pipeline = (
    await admin(
      app,
      'POST',
      `/companies/${company.company_id}/pipelines`,
      {
        name: 'Sales',
        stages: [{ name: 'Lead' }, { name: 'Qualified' }, { name: 'Won' }],
        statuses: [{ name: 'Open' }, { name: 'Lost' }],
        fields: options.fields ?? DEFAULT_FIELDS,
        ...(options.duplicate_detection ? { duplicate_detection: options.duplicate_detection } : {}),
      },
      201,
    )
  ).json();
  return tenantFrom(company, user, pipeline, await createKey(app, company.company_id, user.user_id, options.scopes));
}

/** The Tenant of a company, its user, pipeline and key as the admin API answered them. */
export function tenantFrom(
  company: { company_id: string },
  user: { user_id: string },
  pipeline: { pipeline_id: string; stages: Array<{ stage_id: string }>; statuses: Array<{ status_id: string }> },
  key: { key: string; key_id: string },
): Tenant {
  return {
    companyId: company.company_id,
    userId: user.user_id,
    pipelineId: pipeline.pipeline_id,
    stageIds: pipeline.stages.map((stage) => stage.stage_id),
    statusIds: pipeline.statuses.map((status) => status.status_id),
    key: key.key,
    keyId: key.key_id,
  };
}

export async function createKey(
  app: FastifyInstance,
  companyId: string,
  userId: string,
  scopes?: string[],
  extra: Payload = {},
) {
  return (
    await admin(
      app,
      'POST',
      `/companies/${companyId}/api-keys`,
      { name: 'test key', created_by: userId, ...(scopes ? { scopes } : {}), ...extra },
      201,
    )
  ).json<{ key: string; key_id: string }>();
}

/** Calls the external API with a key. */
export function ext(
  app: FastifyInstance,
  key: string | undefined,
  method: InjectOptions['method'],
  url: string,
  payload?: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method,
    url: `/v1/ext${url}`,
    headers: { ...(key !== undefined ? { 'x-api-key': key } : {}), ...headers },
    ...(payload !== undefined ? { payload: payload as Payload } : {}),
  });
}

export function expectProblem(response: LightMyRequestResponse, status: number, code: string) {
  expect(response.statusCode, response.body).toBe(status);
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = response.json();
  expect(body).toMatchObject({
    status,
    code,
    type: expect.stringContaining(code),
    title: expect.any(String),
    request_id: expect.any(String),
  });
  expect(JSON.stringify(body)).not.toMatch(/at .+\.(ts|js):\d+|Mongo[A-Za-z]*Error|E11000/);
  return body;
}

/** Creates an item through the API and returns its body. */
export async function createItem(app: FastifyInstance, tenant: Tenant, body: Payload = {}) {
  const response = await ext(app, tenant.key, 'POST', '/items', {
    name: 'Deal',
    pipeline_id: tenant.pipelineId,
    stage_id: tenant.stageIds[0],
    ...body,
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

/** Creates a task through the API and returns its body. */
export async function createTask(app: FastifyInstance, tenant: Tenant, body: Payload = {}) {
  const response = await ext(app, tenant.key, 'POST', '/tasks', {
    title: 'Call back',
    due_at: '2026-11-22T09:30:00Z',
    ...body,
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json();
}

/** The fields of a created hook, in the order the API writes them (the secret only here, never in lists). */
export const CREATED_HOOK_KEYS = [
  'hook_id',
  'target_url',
  'event',
  'events',
  'filter',
  'secret',
  'created_at',
  'enabled',
  'disabled_reason',
  'disabled_at',
];
