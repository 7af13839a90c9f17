import { displayPrefixOf, hashApiKey } from '../auth/key-material.js';
import type { App } from '../app.js';

interface DemoSeed {
  _id: 'demo';
  company_id: string;
  user_id: string;
  pipeline_id: string;
}

/**
 * Seeds a demo company through the admin API itself (so the demo exercises the real code path), once
 * per database, and makes sure `apiKey` (the value kept in `.dev/`) is a key of it: on a fresh
 * database (the embedded ones start empty) a key is created through the admin API and given that value.
 */
export async function seedDemo(app: App, adminToken: string, apiKey: string): Promise<DemoSeed> {
  const headers = { authorization: `Bearer ${adminToken}` };
  const admin = async (method: 'POST', url: string, payload: object) => {
    const response = await app.inject({ method, url: `/v1/admin${url}`, headers, payload });
    if (response.statusCode !== 201) throw new Error(`seeding ${url} failed: ${response.statusCode} ${response.body}`);
    return response.json();
  };
  const seeds = app.deps.db.collection<DemoSeed>('dev_seed');
  let seed = await seeds.findOne({ _id: 'demo' });
  if (!seed) {
    const company = await admin('POST', '/companies', { name: 'Demo company' });
    const user = await admin('POST', `/companies/${company.company_id}/users`, {
      name: 'Dana Demo',
      email: 'dana@demo.example',
    });
    const pipeline = await admin('POST', `/companies/${company.company_id}/pipelines`, {
      name: 'Sales',
      stages: [{ name: 'Lead' }, { name: 'Qualified' }, { name: 'Proposal' }, { name: 'Won' }],
      statuses: [{ name: 'Open' }, { name: 'On hold' }],
      fields: [
        { name: 'deal_value', type: 'number' },
        { name: 'industry', type: 'select', options: ['software', 'retail', 'health'] },
        { name: 'website', type: 'url' },
      ],
      duplicate_detection: { fields: ['name', 'contact_id'], match: 'any', case_insensitive: true },
    });
    seed = { _id: 'demo', company_id: company.company_id, user_id: user.user_id, pipeline_id: pipeline.pipeline_id };
    await seeds.insertOne(seed);
  }
  const wanted = hashApiKey(apiKey);
  if (!(await app.repos.apiKeys.findByHash(wanted))) {
    const key = await admin('POST', `/companies/${seed.company_id}/api-keys`, {
      name: 'demo key (npm run dev)',
      created_by: seed.user_id,
    });
    // The admin API never takes a key value; only this dev seed re-keys its own fresh key.
    await app.deps.db
      .collection('api_keys')
      .updateOne({ _id: key.key_id }, { $set: { key_hash: wanted, prefix: displayPrefixOf(apiKey) } });
  }
  return seed;
}
