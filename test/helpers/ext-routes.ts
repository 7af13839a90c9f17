import type { FastifyInstance } from 'fastify';
import { createItem, type Tenant } from './fixtures.js';

export interface ExtRouteCase {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  scope: string;
  url(tenant: Tenant): string;
  body?(tenant: Tenant): unknown;
}

/** Every `/v1/ext/` route with the scope it needs; the auth matrix test walks this list. */
export const EXT_ROUTES: ExtRouteCase[] = [
  { method: 'GET', scope: 'items:read', url: () => '/pipelines' },
  { method: 'GET', scope: 'items:read', url: (t) => `/pipelines/${t.pipelineId}` },
  { method: 'GET', scope: 'items:read', url: () => '/items' },
  { method: 'GET', scope: 'items:read', url: (t) => `/items/${t.itemId}` },
  { method: 'POST', scope: 'items:write', url: () => '/items', body: (t) => ({ name: 'Matrix', pipeline_id: t.pipelineId, stage_id: t.stageIds[0] }) },
  { method: 'PATCH', scope: 'items:write', url: (t) => `/items/${t.itemId}`, body: () => ({ name: 'Matrix renamed' }) },
  { method: 'POST', scope: 'items:read', url: () => '/items/check-duplicates', body: (t) => ({ pipeline_id: t.pipelineId, name: 'Deal' }) },
];

/** Records the routes above refer to. */
export async function seedResources(app: FastifyInstance, tenant: Tenant): Promise<void> {
  tenant.itemId = (await createItem(app, tenant)).item_id;
}
