/**
 * The operationId of every documented operation, verb first, so generated SDKs get methods such as
 * `client.listItems()`. Ids are part of the public contract: never rename one. A new route adds its
 * row here; a test fails for any documented operation without one (test/docs/openapi-reference.test.ts).
 * Keys are `METHOD path` as the OpenAPI document spells the path.
 */
export const OPERATION_IDS: Readonly<Record<string, string>> = {
  'GET /v1/ext/pipelines': 'listPipelines',
  'GET /v1/ext/pipelines/{pipeline_id}': 'getPipeline',
  'GET /v1/ext/items': 'listItems',
  'POST /v1/ext/items': 'createItem',
  'GET /v1/ext/items/{item_id}': 'getItem',
  'PATCH /v1/ext/items/{item_id}': 'updateItem',
  'DELETE /v1/ext/items/{item_id}': 'deleteItem',
  'POST /v1/ext/items/check-duplicates': 'checkItemDuplicates',
  'PUT /v1/ext/items/by-external-id/{external_id}': 'upsertItemByExternalId',
  'POST /v1/ext/items/batch': 'batchItems',
  'GET /v1/ext/tasks': 'listTasks',
  'POST /v1/ext/tasks': 'createTask',
  'GET /v1/ext/tasks/{task_id}': 'getTask',
  'PATCH /v1/ext/tasks/{task_id}': 'updateTask',
  'DELETE /v1/ext/tasks/{task_id}': 'deleteTask',
  'GET /v1/ext/items/{item_id}/history': 'listItemHistory',
  'GET /v1/ext/tasks/{task_id}/history': 'listTaskHistory',
  'GET /v1/ext/export/items': 'exportItems',
  'GET /v1/ext/export/tasks': 'exportTasks',
  'GET /v1/ext/events': 'listEvents',
  'GET /v1/ext/events/{event_id}': 'getEvent',
  'POST /v1/ext/hooks': 'createHook',
  'GET /v1/ext/hooks': 'listHooks',
  'DELETE /v1/ext/hooks/{hook_id}': 'deleteHook',
  'PATCH /v1/ext/hooks/{hook_id}': 'updateHook',
  'POST /v1/ext/hooks/{hook_id}/test': 'testHook',
  'POST /v1/ext/hooks/{hook_id}/rotate-secret': 'rotateHookSecret',
  'GET /v1/ext/hooks/{hook_id}/deliveries': 'listHookDeliveries',
  'POST /v1/ext/hooks/{hook_id}/deliveries/{event_id}/redeliver': 'redeliverHookDelivery',
  'POST /v1/ext/hooks/{hook_id}/recover': 'recoverHook',

  'POST /v1/admin/companies': 'createCompany',
  'GET /v1/admin/companies/{company_id}': 'getCompany',
  'PATCH /v1/admin/companies/{company_id}': 'updateCompany',
  'POST /v1/admin/companies/{company_id}/users': 'createUser',
  'GET /v1/admin/companies/{company_id}/users': 'listUsers',
  'POST /v1/admin/companies/{company_id}/pipelines': 'createCompanyPipeline',
  'GET /v1/admin/companies/{company_id}/pipelines': 'listCompanyPipelines',
  'GET /v1/admin/companies/{company_id}/pipelines/{pipeline_id}': 'getCompanyPipeline',
  'PATCH /v1/admin/companies/{company_id}/pipelines/{pipeline_id}': 'updateCompanyPipeline',
  'POST /v1/admin/companies/{company_id}/api-keys': 'createApiKey',
  'GET /v1/admin/companies/{company_id}/api-keys': 'listApiKeys',
  'PATCH /v1/admin/companies/{company_id}/api-keys/{key_id}': 'renameApiKey',
  'DELETE /v1/admin/companies/{company_id}/api-keys/{key_id}': 'revokeApiKey',
  'POST /v1/admin/companies/{company_id}/automations': 'createAutomation',
  'GET /v1/admin/companies/{company_id}/automations': 'listAutomations',
  'PATCH /v1/admin/companies/{company_id}/automations/{automation_id}': 'updateAutomation',
  'DELETE /v1/admin/companies/{company_id}/automations/{automation_id}': 'deleteAutomation',
  'GET /v1/admin/companies/{company_id}/automation-webhook-secret': 'getAutomationWebhookSecret',
  'GET /v1/admin/companies/{company_id}/automation-runs': 'listAutomationRuns',
  'GET /v1/admin/companies/{company_id}/hooks': 'listCompanyHooks',
  'GET /v1/admin/companies/{company_id}/hooks/{hook_id}': 'getCompanyHook',
  'DELETE /v1/admin/companies/{company_id}/hooks/{hook_id}': 'deleteCompanyHook',
  'POST /v1/admin/companies/{company_id}/erasures': 'createErasure',
  'GET /v1/admin/companies/{company_id}/erasures/{erasure_id}': 'getErasure',
  'GET /v1/admin/openapi.json': 'getAdminOpenApiDocument',
};

/** `/v1/ext/items/:item_id` (a Fastify route) → `/v1/ext/items/{item_id}` (an OpenAPI path). */
export function openApiPath(fastifyPath: string): string {
  return fastifyPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

export function operationIdOf(method: string, openApiPathName: string): string | undefined {
  return OPERATION_IDS[`${method.toUpperCase()} ${openApiPathName}`];
}
