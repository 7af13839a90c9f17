import { must } from '../../src/shared/must.js';
import { compare, type LoadTarget } from '../load.js';
import { comparisonRow, int, type Row } from '../report.js';
import { compareSettings, json, type BenchContext } from './context.js';
import type { ItemDoc } from '../../src/contracts/items.js';
import type autocannon from 'autocannon';

/**
 * Ours against the bare driver doing the same unavoidable MongoDB work: information (what our pipeline costs a
 * route), not a target; ours is judged against the conventional stack (scenarios/conventional.ts).
 */
const INFORMATION = undefined;

/** Cycles through `ids`, one per request, so no single document is hot. */
function rotating(
  ids: string[],
  path: (id: string) => string,
  extra: Partial<autocannon.Request> = {},
): autocannon.Request[] {
  let next = 0;
  return [
    {
      ...extra,
      setupRequest: (request) => ({ ...request, path: path(must(ids[next++ % ids.length], 'a seeded id')) }),
    },
  ];
}

/**
 * PATCH with the current version over `ids`: versions are read from MongoDB before each run and advanced
 * from every 200 answer, and the rotation is long enough that no item is in flight twice, so every
 * request is a real update and none a 409.
 */
export async function versionedPatches(
  context: BenchContext,
  path: (id: string) => string,
  idOf: (body: Record<string, unknown>) => string,
  ids = context.seeded.itemIds,
): Promise<autocannon.Request[]> {
  const versions = new Map<string, number>();
  // Requests still in flight when the previous run stopped land a moment later: read after them.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const docs = await context.stack.db
    .collection<ItemDoc>('items')
    .find({ company_id: context.seeded.crud.companyId }, { projection: { _id: 1, version: 1 } })
    .toArray();
  for (const doc of docs) versions.set(doc._id, doc.version);
  let next = 0;
  return [
    {
      method: 'PATCH',
      setupRequest: (request) => {
        const id = must(ids[next++ % ids.length], 'a seeded id');
        return {
          ...request,
          path: path(id),
          body: JSON.stringify({ name: `Deal ${id.slice(-6)} rev ${next}`, version: versions.get(id) }),
        };
      },
      onResponse: (status, body) => {
        if (status !== 200) return;
        const doc = JSON.parse(body) as Record<string, unknown>;
        versions.set(idOf(doc), doc.version as number);
      },
    },
  ];
}

export async function runCrudScenarios(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const settings = compareSettings(options);
  const tenant = seeded.crud;
  const ours = (target: Omit<LoadTarget, 'url'>): LoadTarget => ({
    url: stack.web.url,
    server: 'web',
    ...target,
    headers: { 'x-api-key': tenant.key, ...json, ...target.headers },
  });
  const bare = (target: Omit<LoadTarget, 'url'>): LoadTarget => ({
    url: stack.baseline.url,
    server: 'baseline',
    ...target,
    headers: { ...json, ...target.headers },
  });
  const tenancy = `company_id=${tenant.companyId}`;
  const rows: Row[] = [];

  console.log('CRUD scenarios');
  const list = await compare(
    'list items',
    () => ours({ requests: [{ path: `/v1/ext/items?limit=50&pipeline_id=${tenant.pipelineId}` }] }),
    () => bare({ requests: [{ path: `/items?${tenancy}&pipeline_id=${tenant.pipelineId}&limit=50` }] }),
    settings,
  );
  rows.push(
    comparisonRow(
      `list items (limit=50, pipeline filter, ${int(options.items)} items)`,
      list,
      INFORMATION,
      "Baseline: the same find (filter, projection, sort, limit 51) returning the documents. Ours also maps and serializes 50 items with the pipeline's custom fields (the pipeline comes from the process cache).",
    ),
  );

  const get = await compare(
    'get item',
    () => ours({ requests: rotating(seeded.itemIds, (id) => `/v1/ext/items/${id}`) }),
    () => bare({ requests: rotating(seeded.itemIds, (id) => `/items/${id}?${tenancy}`) }),
    settings,
  );
  rows.push(
    comparisonRow(
      'get one item',
      get,
      INFORMATION,
      'Baseline: findOne of the item plus findOne of its pipeline. Ours reads the item and takes the pipeline from the process cache (dropped on every announced pipeline change).',
    ),
  );

  const taskBody = JSON.stringify({ title: 'Call back about the renewal', due_at: '2031-01-15T09:30:00Z' });
  const create = await compare(
    'create task',
    () =>
      ours({ method: 'POST', body: taskBody, requests: [{ method: 'POST', path: '/v1/ext/tasks', body: taskBody }] }),
    () =>
      bare({
        method: 'POST',
        body: taskBody,
        requests: [{ method: 'POST', path: `/tasks?${tenancy}&user_id=${tenant.userId}`, body: taskBody }],
      }),
    settings,
  );
  rows.push(
    comparisonRow(
      'create task (event recorded)',
      create,
      INFORMATION,
      'Baseline: one insertOne of the same task document with its event. Ours also makes the rate-limit Redis call and, after answering, publishes the event to both queues (one Redis round trip) and clears it from the outbox (one more MongoDB write per task); both are shared by the requests answered meanwhile.',
    ),
  );

  const patch = await compare(
    'patch item',
    async () =>
      ours({
        requests: await versionedPatches(
          context,
          (id) => `/v1/ext/items/${id}`,
          (doc) => doc.item_id as string,
        ),
      }),
    async () =>
      bare({
        requests: await versionedPatches(
          context,
          (id) => `/items/${id}?${tenancy}`,
          (doc) => doc._id as string,
        ),
      }),
    settings,
  );
  rows.push(
    comparisonRow(
      'PATCH item with version',
      patch,
      INFORMATION,
      "Baseline: the single findOneAndUpdate with the version in its filter. Ours first reads the item (to validate against its pipeline, from the process cache, and compute the event's changes), then makes that same findOneAndUpdate with the event, and after answering publishes the item.updated event and clears it from the outbox (one more MongoDB write per item, shared by the requests answered meanwhile).",
    ),
  );
  return rows;
}
