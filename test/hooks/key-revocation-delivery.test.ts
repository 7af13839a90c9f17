import { describe, expect, it } from 'vitest';
import { admin, createKey, createTask, createTenant } from '../helpers/fixtures.js';
import { hooksTestEnv } from '../helpers/hooks.js';
import { waitFor } from '../helpers/wait.js';

const env = hooksTestEnv({ HOOK_BACKOFF_MS: '60000' });

const titleOf = (body: string) => (JSON.parse(body) as { type: string; data: { title?: string } }).data.title;

describe('revoking the key that created a hook (DECISIONS.md 13.4)', () => {
  it('stops its deliveries at once, while the hooks of other keys keep receiving', async () => {
    const tenant = await createTenant(env.t.app);
    const doomed = await createKey(env.t.app, tenant.companyId, tenant.userId, ['hooks:manage', 'tasks:read']);
    const revokedInbox = await env.receiver();
    const keptInbox = await env.receiver();
    await env.subscribe({ ...tenant, key: doomed.key }, { target_url: revokedInbox.url(), event: 'task.created' });
    await env.subscribe(tenant, { target_url: keptInbox.url(), event: 'task.created' });

    await createTask(env.t.app, tenant, { title: 'before' });
    await waitFor(() => revokedInbox.requests.length === 1 && keptInbox.requests.length === 1);

    await admin(env.t.app, 'DELETE', `/companies/${tenant.companyId}/api-keys/${doomed.key_id}`, undefined, 204);
    await createTask(env.t.app, tenant, { title: 'after' });
    await createTask(env.t.app, tenant, { title: 'later' });
    // The positive signal: both later events reached the other key's hook.
    await waitFor(() => keptInbox.requests.length === 3);
    expect(keptInbox.requests.map((request) => titleOf(request.body)).sort()).toEqual(['after', 'before', 'later']);
    expect(revokedInbox.requests.map((request) => titleOf(request.body))).toEqual(['before']);
  });
});
