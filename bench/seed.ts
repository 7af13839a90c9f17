import cliProgress from 'cli-progress';
import { duplicateTokens } from '../src/items/duplicates.js';
import { nameWords } from '../src/items/search.js';
import { newId } from '../src/shared/ids.js';
import { must } from '../src/shared/must.js';
import type { ItemDoc } from '../src/contracts/items.js';
import type { PipelineDoc } from '../src/contracts/pipelines.js';
import type { Stack } from './stack.js';

/** The `source` of the seeded items, which every scenario's own items lack (theirs come through the API). */
export const SEEDED_ITEM_SOURCE = 'import';

export interface Tenant {
  companyId: string;
  userId: string;
  /** The pipeline the list filter selects; three quarters of the items are in it. */
  pipelineId: string;
  stageIds: string[];
  key: string;
}

export interface Seeded {
  /** The company of the CRUD scenarios, with `items` items. */
  crud: Tenant;
  itemIds: string[];
  /** A second company for the webhook and memory scenarios (its task.created events go to a hook). */
  hooks: Tenant;
}

const INDUSTRIES = ['software', 'retail', 'health'];
const CHUNK = 1_000;

/** The admin API of our own web process, as an operator (or the product's settings UI) would call it. */
async function admin<T>(stack: Stack, path: string, body: object): Promise<T> {
  const response = await fetch(`${stack.web.url}/v1/admin${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== 201) throw new Error(`seeding ${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

export async function createTenant(stack: Stack, name: string): Promise<Tenant & { otherPipelineId: string }> {
  const company = await admin<{ company_id: string }>(stack, '/companies', { name });
  const companyPath = `/companies/${company.company_id}`;
  const user = await admin<{ user_id: string }>(stack, `${companyPath}/users`, {
    name: 'Bench User',
    email: `bench-${company.company_id}@example.com`,
  });
  const pipelineBody = (title: string) => ({
    name: title,
    stages: [{ name: 'Lead' }, { name: 'Qualified' }, { name: 'Proposal' }, { name: 'Won' }],
    statuses: [{ name: 'Open' }, { name: 'On hold' }],
    fields: [
      { name: 'deal_value', type: 'number' },
      { name: 'industry', type: 'select', options: INDUSTRIES },
      { name: 'website', type: 'url' },
    ],
  });
  const pipeline = await admin<{ pipeline_id: string; stages: Array<{ stage_id: string }> }>(
    stack,
    `${companyPath}/pipelines`,
    pipelineBody('Sales'),
  );
  const other = await admin<{ pipeline_id: string }>(stack, `${companyPath}/pipelines`, pipelineBody('Partners'));
  const key = await admin<{ key: string }>(stack, `${companyPath}/api-keys`, {
    name: 'bench',
    created_by: user.user_id,
  });
  return {
    companyId: company.company_id,
    userId: user.user_id,
    pipelineId: pipeline.pipeline_id,
    otherPipelineId: other.pipeline_id,
    stageIds: pipeline.stages.map((stage) => stage.stage_id),
    key: key.key,
  };
}

/**
 * Items go in with bulk driver inserts, shaped exactly as the API stores them (duplicate tokens,
 * short ids, the company's sequence counter moved past them), since creating 10,000 through the
 * API would only measure seeding.
 */
export async function insertItems(
  stack: Stack,
  tenant: Tenant & { otherPipelineId: string },
  count: number,
): Promise<string[]> {
  const pipelines = stack.db.collection<PipelineDoc>('pipelines');
  const [main, other] = await Promise.all([
    pipelines.findOne({ _id: tenant.pipelineId }),
    pipelines.findOne({ _id: tenant.otherPipelineId }),
  ]);
  if (!main || !other) throw new Error('seeded pipelines not found');
  const bar = new cliProgress.SingleBar(
    { format: 'seeding items [{bar}] {value}/{total} {duration}s', hideCursor: true },
    cliProgress.Presets.shades_classic,
  );
  bar.start(count, 0);
  const ids: string[] = [];
  const start = Date.now() - count;
  try {
    for (let offset = 0; offset < count; offset += CHUNK) {
      const docs: ItemDoc[] = [];
      for (let index = offset; index < Math.min(count, offset + CHUNK); index++) {
        const pipeline = index % 4 === 3 ? other : main;
        const custom = {
          deal_value: 1_000 + (index % 97) * 250,
          industry: INDUSTRIES[index % 3] ?? 'Retail',
          website: `https://customer-${index}.example.com`,
        };
        const values = { name: `Deal ${index}`, contact_id: `contact-${index % 500}`, custom };
        const at = new Date(start + index);
        const id = newId('item');
        docs.push({
          _id: id,
          company_id: tenant.companyId,
          short_id: `I-${index + 1}`,
          name: values.name,
          pipeline_id: pipeline._id,
          stage_id: must(pipeline.stages[index % pipeline.stages.length], 'a stage').stage_id,
          status_id: null,
          contact_id: values.contact_id,
          source: SEEDED_ITEM_SOURCE,
          custom,
          dup_tokens: duplicateTokens(pipeline, values),
          external_id: null,
          name_words: nameWords(values.name),
          version: 1,
          created_at: at,
          updated_at: at,
        });
        ids.push(id);
      }
      await stack.db.collection<ItemDoc>('items').insertMany(docs, { ordered: false });
      bar.update(Math.min(count, offset + CHUNK));
    }
  } finally {
    bar.stop();
  }
  await stack.db
    .collection<{ _id: string; seq: number }>('counters')
    .updateOne({ _id: `items:${tenant.companyId}` }, { $set: { seq: count } }, { upsert: true });
  return ids;
}

/** More companies with a user, pipelines and an API key each (the webhook scenario's receivers' owners). */
export async function createTenants(stack: Stack, name: string, count: number): Promise<Tenant[]> {
  const tenants: Tenant[] = [];
  for (let index = 0; index < count; index++) tenants.push(await createTenant(stack, `${name} ${index + 1}`));
  return tenants;
}

export async function seed(stack: Stack, items: number): Promise<Seeded> {
  const crud = await createTenant(stack, 'Bench CRUD Ltd');
  const hooks = await createTenant(stack, 'Bench Hooks Inc');
  const itemIds = await insertItems(stack, crud, items);
  return { crud, itemIds, hooks };
}
