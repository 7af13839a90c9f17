import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEvent, WEBHOOK_EVENT_TYPES, webhookSchemaId } from '../../src/contracts/envelope.js';
import { webhookPayloadSchema } from '../../src/hooks/payloads.js';
import { webhookBody } from '../../src/hooks/signing.js';
import { must } from '../../src/shared/must.js';
import { buildTestApp, startTestWorkers, type TestApp } from '../helpers/app.js';
import { createItem, createTask, createTenant, ext } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';
import { payloadViolation, Receiver } from './receiver.js';

let t: TestApp;
let workers: { close(): Promise<void> };
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '100000', HOOK_BACKOFF_MS: '100' }, { publisher: true });
  workers = await startTestWorkers(t.config, t.db, ['relay', 'hooks']);
});
afterAll(async () => {
  await workers?.close();
  await t?.close();
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('per-event payload schemas (issue 19)', () => {
  it('the OpenAPI webhooks give each type its own schema: typed data and the right type in every example', async () => {
    const document = (await t.app.inject({ method: 'GET', url: '/v1/ext/openapi.json' })).json<Json>();
    expect(Object.keys(document.webhooks)).toEqual([...WEBHOOK_EVENT_TYPES]);
    for (const type of WEBHOOK_EVENT_TYPES) {
      const ref = document.webhooks[type].post.requestBody.content['application/json'].schema.$ref as string;
      expect(ref).toBe(`#/components/schemas/${webhookSchemaId(type)}`);
      const schema = document.components.schemas[webhookSchemaId(type)];
      expect(schema.properties.type.const).toBe(type);
      expect(schema.example.type).toBe(type);
      const data = schema.properties.data;
      // The resources as events carry them: values over the envelope cap may be TruncatedValue markers (issue 59).
      if (type.startsWith('task.')) expect(data.$ref).toBe('#/components/schemas/EventTask');
      else if (type.startsWith('item.')) expect(data.$ref).toBe('#/components/schemas/EventItem');
      else if (type.startsWith('hook.') && type !== 'hook.ping') expect(data.$ref).toBe('#/components/schemas/Hook');
      else expect(data.properties).toEqual({ hook_id: expect.objectContaining({ type: 'string' }) });
      // Every example is a body its own schema accepts.
      expect(webhookPayloadSchema(type).safeParse(schema.example).success, type).toBe(true);
    }
  });

  it('the body sent is written by the schema: internal fields never leave, custom fields of items do', () => {
    const event = buildEvent(
      'task.updated',
      'cmp_1',
      { task_id: 'tsk_1', title: 'Call', internal_note: 'not for receivers' },
      { depth: 2, changes: { title: { from: 'a', to: 'Call' } } },
    );
    const body = JSON.parse(webhookBody({ ...event, sequence: 7 }));
    expect(Object.keys(body)).toEqual([
      'event_id',
      'type',
      'company_id',
      'occurred_at',
      'sequence',
      'actor',
      'data',
      'changes',
    ]);
    expect(body).toMatchObject({ sequence: 7, actor: { type: 'system' } });
    expect(body.data).toEqual({ task_id: 'tsk_1', title: 'Call' });
    const item = buildEvent('item.created', 'cmp_1', { item_id: 'itm_1', name: 'Deal', deal_value: 5, tags: ['a'] });
    expect(JSON.parse(webhookBody(item)).data).toEqual({ item_id: 'itm_1', name: 'Deal', deal_value: 5, tags: ['a'] });
  });

  it("the Receiver's check flags a body that does not match its type's schema", () => {
    const task = buildEvent('task.created', 'cmp_1', { task_id: 'tsk_1' });
    expect(payloadViolation(JSON.stringify(task))).toMatch(/^task\.created: /);
    expect(payloadViolation(JSON.stringify({ ...task, type: 'task.archived' }))).toBe(
      'unknown event type task.archived',
    );
    expect(payloadViolation('not json')).toBe('the body is not JSON');
    const ping = {
      event_id: 'evt_1',
      type: 'hook.ping',
      company_id: 'c',
      occurred_at: 'x',
      actor: { type: 'api_key', id: 'key_1' },
      data: { hook_id: 'hk' },
    };
    expect(payloadViolation(JSON.stringify(ping))).toBeUndefined();
    expect(payloadViolation(JSON.stringify({ ...ping, depth: 1 }))).toBe('hook.ping: undeclared envelope keys depth');
  });

  it('every delivery of real task, item and ping events validates against its type (zero violations)', async () => {
    const inbox = await Receiver.start();
    try {
      const tenant = await createTenant(t.app);
      const hook = (await ext(t.app, tenant.key, 'POST', '/hooks', { target_url: inbox.url(), event: '*' })).json();
      const item = await createItem(t.app, tenant, { metadata: { deal_value: 12, industry: 'retail' } });
      const task = await createTask(t.app, tenant, { item_id: item.item_id });
      await ext(t.app, tenant.key, 'PATCH', `/items/${item.item_id}`, { name: 'Renamed', version: item.version });
      await ext(t.app, tenant.key, 'PATCH', `/tasks/${task.task_id}`, { is_completed: true });
      await ext(t.app, tenant.key, 'DELETE', `/tasks/${task.task_id}`);
      await ext(t.app, tenant.key, 'DELETE', `/items/${item.item_id}`);
      await ext(t.app, tenant.key, 'POST', `/hooks/${hook.hook_id}/test`);
      const expected = [
        'item.created',
        'task.created',
        'item.updated',
        'task.updated',
        'task.completed',
        'task.deleted',
        'item.deleted',
        'hook.ping',
      ];
      await waitFor(() => inbox.requests.length >= expected.length);
      const types = inbox.requests.map((request) => JSON.parse(request.body).type as string);
      expect([...types].sort()).toEqual([...expected].sort());
      expect(inbox.violations).toEqual([]);
      const updated = must(
        inbox.requests.find((request) => request.body.includes('"item.updated"')),
        'the item.updated delivery',
      );
      expect(JSON.parse(updated.body).data).toMatchObject({ name: 'Renamed', deal_value: 12, industry: 'retail' });
    } finally {
      await inbox.close();
    }
  });
});
