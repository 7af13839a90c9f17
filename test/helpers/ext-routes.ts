import type { Tenant } from './fixtures.js';

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
];
