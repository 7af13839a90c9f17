import { createItem, createTask, ext, type Tenant } from './fixtures.js';
import type { FastifyInstance } from 'fastify';

export interface ExtRouteCase {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  scope: string;
  url(tenant: Tenant): string;
  body?(tenant: Tenant): unknown;
  /** Scopes the body needs besides `scope`: a hook's events need their read scopes (DECISIONS.md 13.4). */
  bodyScopes?: string[];
}

/** Every `/v1/ext/` route with the scope it needs; the auth matrix test walks this list. */
export const EXT_ROUTES: ExtRouteCase[] = [
  { method: 'GET', scope: 'items:read', url: () => '/pipelines' },
  { method: 'GET', scope: 'items:read', url: (t) => `/pipelines/${t.pipelineId}` },
  { method: 'GET', scope: 'items:read', url: () => '/items' },
  { method: 'GET', scope: 'items:read', url: (t) => `/items/${t.itemId}` },
  {
    method: 'POST',
    scope: 'items:write',
    url: () => '/items',
    body: (t) => ({ name: 'Matrix', pipeline_id: t.pipelineId, stage_id: t.stageIds[0] }),
  },
  { method: 'PATCH', scope: 'items:write', url: (t) => `/items/${t.itemId}`, body: () => ({ name: 'Matrix renamed' }) },
  {
    method: 'POST',
    scope: 'items:read',
    url: () => '/items/check-duplicates',
    body: (t) => ({ pipeline_id: t.pipelineId, name: 'Deal' }),
  },
  { method: 'GET', scope: 'tasks:read', url: () => '/tasks' },
  { method: 'GET', scope: 'tasks:read', url: (t) => `/tasks/${t.taskId}` },
  {
    method: 'POST',
    scope: 'tasks:write',
    url: () => '/tasks',
    body: () => ({ title: 'Matrix', due_at: '2026-11-22T09:30:00Z' }),
  },
  {
    method: 'PATCH',
    scope: 'tasks:write',
    url: (t) => `/tasks/${t.taskId}`,
    body: () => ({ title: 'Matrix renamed' }),
  },
  {
    method: 'POST',
    scope: 'hooks:manage',
    url: () => '/hooks',
    body: (t) => ({ target_url: `${t.hookBaseUrl ?? 'https://hooks.example.com'}/matrix`, event: '*' }),
    bodyScopes: ['tasks:read', 'items:read'],
  },
  { method: 'GET', scope: 'hooks:manage', url: () => '/hooks' },
  { method: 'GET', scope: 'hooks:manage', url: (t) => `/hooks/${t.hookId}/deliveries` },
  {
    method: 'POST',
    scope: 'hooks:manage',
    url: (t) => `/hooks/${t.hookId}/deliveries/evt_000000000000000000000000/redeliver`,
  },
  { method: 'POST', scope: 'hooks:manage', url: (t) => `/hooks/${t.hookId}/rotate-secret` },
  { method: 'POST', scope: 'hooks:manage', url: (t) => `/hooks/${t.hookId}/test` },
  { method: 'PATCH', scope: 'hooks:manage', url: (t) => `/hooks/${t.hookId}`, body: () => ({ enabled: true }) },
  {
    method: 'POST',
    scope: 'hooks:manage',
    url: (t) => `/hooks/${t.hookId}/recover`,
    body: () => ({ since: new Date(Date.now() - 3_600_000).toISOString() }),
  },
  { method: 'DELETE', scope: 'hooks:manage', url: (t) => `/hooks/${t.hookId}` },
  { method: 'GET', scope: 'items:read', url: (t) => `/items/${t.itemId}/history` },
  { method: 'GET', scope: 'items:read', url: (t) => `/items/${t.itemId}?as_of=${new Date().toISOString()}` },
  { method: 'GET', scope: 'tasks:read', url: (t) => `/tasks/${t.taskId}/history` },
  { method: 'GET', scope: 'items:read', url: () => '/export/items' },
  { method: 'GET', scope: 'tasks:read', url: () => '/export/tasks' },
  { method: 'DELETE', scope: 'items:write', url: (t) => `/items/${t.spareItemId}` },
  { method: 'DELETE', scope: 'tasks:write', url: (t) => `/tasks/${t.spareTaskId}` },
];

/**
 * Records the routes above refer to. Hooks go to `hookBaseUrl` (never delivered to unless workers run;
 * then it must be a loopback receiver).
 */
export async function seedResources(
  app: FastifyInstance,
  tenant: Tenant,
  hookBaseUrl = 'https://hooks.example.com',
): Promise<void> {
  tenant.hookBaseUrl = hookBaseUrl;
  tenant.itemId = (await createItem(app, tenant)).item_id;
  tenant.taskId = (await createTask(app, tenant)).task_id;
  tenant.spareItemId = (await createItem(app, tenant, { name: 'Spare' })).item_id;
  tenant.spareTaskId = (await createTask(app, tenant, { title: 'Spare' })).task_id;
  tenant.hookId = (
    await ext(app, tenant.key, 'POST', '/hooks', { target_url: `${hookBaseUrl}/seed`, event: '*' })
  ).json().hook_id;
}
