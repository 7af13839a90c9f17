type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * What a parameter means where its schema does not say: the renderer of /docs otherwise shows a
 * generic line ("Integer numbers.") for an undescribed integer. Keyed by where it is and its name;
 * a test holds every parameter of both documents to having a description.
 */
const DESCRIPTIONS: Record<string, string> = {
  'path:automation_id': 'The automation id',
  'path:company_id': 'The company id (`cmp_...`)',
  'path:erasure_id': 'The erasure id (`era_...`), as the erasure request answered it',
  'path:event_id': 'The event id (`evt_...`), also the `webhook-id` of its deliveries',
  'path:hook_id': 'The hook id (`hk_...`)',
  'path:item_id': 'The item id (`itm_...`)',
  'path:key_id': 'The API key id (`key_...`)',
  'path:pipeline_id': 'The pipeline id (`pip_...`)',
  'path:task_id': 'The task id (`tsk_...`)',
  'query:limit': 'Records per page, 1 to 200 (default 50); a page may end earlier, at about 1 MiB',
  'query:cursor':
    'Where the page starts: the `x-next-cursor` (or `Link`) of the previous page; opaque, and valid only for the same list and filters',
  'query:sort': 'The order: a field name, ascending, or `-` and a field name, descending',
  'query:created_after': 'Only records created after this ISO 8601 time',
  'query:updated_after': 'Only records changed after this ISO 8601 time (to sync what changed since a run)',
  'query:due_after': 'Only tasks due after this ISO 8601 time',
  'query:due_before': 'Only tasks due before this ISO 8601 time',
  'query:occurred_after': 'Only events that occurred after this ISO 8601 time',
  'query:occurred_before': 'Only events that occurred before this ISO 8601 time',
  'query:assigned_to': 'Only tasks assigned to this user id',
  'query:contact_id': 'Only items with this contact id',
  'query:is_completed': '`true`: completed tasks only; `false`: open tasks only',
  'query:item_id': 'Only tasks linked to this item id',
  'query:pipeline_id': 'Only items of this pipeline (needed by the `metadata.*` filters)',
  'query:stage_id': 'Only items in this stage',
  'query:status_id': 'Only items with this status',
  'query:priority': 'Only tasks of this priority',
  'query:task_type': 'Only tasks of this type',
  'query:automation_id': 'Only runs of this automation',
};

/** Gives every parameter a description: its schema's own, else the table's. */
export function describeParameters(document: Json): void {
  for (const operations of Object.values<Json>(document.paths ?? {}))
    for (const operation of Object.values<Json>(operations))
      for (const parameter of operation.parameters ?? []) {
        parameter.description ??= parameter.schema?.description ?? DESCRIPTIONS[`${parameter.in}:${parameter.name}`];
        if (parameter.description === undefined) delete parameter.description;
      }
}
