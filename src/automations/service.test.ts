import { describe, expect, it } from 'vitest';
import { DEFAULT_DUPLICATE_DETECTION, type PipelineDoc } from '../contracts/pipelines.js';
import { NotFoundError } from '../shared/errors.js';
import { problemsOf } from '../shared/errors.test-support.js';
import { AutomationsService, type AutomationsServiceDeps } from './service.js';
import type { AutomationDoc } from './repository.js';
import type { createAutomationBody } from './schemas.js';
import type { z } from 'zod';

const at = new Date('2026-11-24T09:00:00Z');

const pipeline = (id: string, companyId: string, suffix: string): PipelineDoc => ({
  _id: id,
  company_id: companyId,
  name: id,
  stages: [{ stage_id: `stg_${suffix}`, name: 'New', position: 0 }],
  statuses: [{ status_id: `sts_${suffix}`, name: 'Open' }],
  fields: [],
  duplicate_detection: DEFAULT_DUPLICATE_DETECTION,
  revision: 1,
  created_at: at,
  updated_at: at,
});

/** The service's ports in memory, for two companies: their automations, users and pipelines, and a URL guard. */
function world() {
  const automations = new Map<string, AutomationDoc>();
  const users = new Map([
    ['usr_1', 'cmp_1'],
    ['usr_2', 'cmp_2'],
  ]);
  const pipelines = [pipeline('pip_1', 'cmp_1', 'mine'), pipeline('pip_2', 'cmp_2', 'theirs')];
  const calls: string[] = [];
  const live = (companyId: string, automationId: string) => {
    const doc = automations.get(automationId);
    return doc && doc.company_id === companyId && !doc.deleted_at ? doc : undefined;
  };
  const deps: AutomationsServiceDeps = {
    automations: {
      async insert(doc) {
        automations.set(doc._id, structuredClone(doc));
      },
      async findById(companyId, automationId) {
        const doc = live(companyId, automationId);
        return doc ? structuredClone(doc) : null;
      },
      async update(companyId, automationId, changes) {
        const doc = live(companyId, automationId);
        if (!doc) return null;
        Object.assign(doc, changes, { updated_at: new Date() });
        return structuredClone(doc);
      },
      async list(companyId) {
        return [...automations.values()]
          .filter((doc) => doc.company_id === companyId && !doc.deleted_at)
          .map((doc) => structuredClone(doc));
      },
      async listRuns(companyId, automationId, limit) {
        calls.push(`automations.listRuns ${companyId} ${automationId} ${limit}`);
        return [];
      },
      async remove(companyId, automationId) {
        const doc = live(companyId, automationId);
        if (!doc) return false;
        Object.assign(doc, { deleted_at: new Date(), enabled: false });
        return true;
      },
    },
    users: {
      async findById(companyId, userId) {
        calls.push(`users.findById ${companyId} ${userId}`);
        return users.get(userId) === companyId ? { _id: userId } : null;
      },
    },
    pipelines: {
      async list(companyId) {
        calls.push(`pipelines.list ${companyId}`);
        return pipelines.filter((doc) => doc.company_id === companyId);
      },
    },
    targetGuard: {
      async problemWithUrl(url) {
        calls.push(`targetGuard.problemWithUrl ${url}`);
        return new URL(url).hostname === 'internal.example' ? 'must not point to a private address' : undefined;
      },
    },
    webhookSecrets: {
      async forCompany(companyId) {
        return `whsec_of_${companyId}`;
      },
    },
  };
  return { deps, automations, calls };
}

type CreateBody = z.infer<typeof createAutomationBody>;
const validBody: CreateBody = {
  name: 'Follow up calls',
  enabled: true,
  trigger: 'task.completed',
  conditions: { task_type: 'call', assigned_to: 'usr_1' },
  actions: [
    { type: 'create_task', title: 'Send the summary', due_in_minutes: 60, assigned_to: 'usr_1' },
    { type: 'update_item', stage_id: 'stg_mine', status_id: 'sts_mine' },
    { type: 'webhook', url: 'https://hooks.example/automation' },
  ],
};

describe('AutomationsService', () => {
  it('create stores a rule whose references resolve in the company; no conditions are stored as null', async () => {
    const { deps, automations, calls } = world();
    const service = new AutomationsService(deps);
    const created = await service.create('cmp_1', validBody);
    expect(created._id).toMatch(/^aut_[0-9a-f]{24}$/);
    expect(automations.get(created._id)).toEqual({
      ...validBody,
      _id: created._id,
      company_id: 'cmp_1',
      created_at: expect.any(Date),
      updated_at: expect.any(Date),
    });
    expect(calls).toEqual([
      'users.findById cmp_1 usr_1',
      'pipelines.list cmp_1',
      'users.findById cmp_1 usr_1',
      'targetGuard.problemWithUrl https://hooks.example/automation',
    ]);

    const { conditions: _conditions, ...withoutConditions } = validBody;
    const bare = await service.create('cmp_1', {
      ...withoutConditions,
      actions: [{ type: 'webhook', url: 'https://hooks.example/b' }],
    });
    expect(automations.get(bare._id)?.conditions).toBeNull();
    // No update_item action: the pipelines are not read.
    expect(calls.filter((call) => call.startsWith('pipelines.')).length).toBe(1);
  });

  it('create names every reference that does not resolve in the company, and stores nothing', async () => {
    const { deps, automations } = world();
    const problems = await problemsOf(
      new AutomationsService(deps).create('cmp_1', {
        ...validBody,
        conditions: { assigned_to: 'usr_2' }, // a user of another company
        actions: [
          { type: 'create_task', title: 'Call back', due_in_minutes: 5, assigned_to: 'usr_nobody' },
          { type: 'update_item', stage_id: 'stg_theirs', status_id: 'sts_theirs' }, // another company's pipeline
          { type: 'webhook', url: 'http://internal.example/hook' },
          { type: 'update_item', stage_id: 'stg_mine' }, // fine
        ],
      }),
    );
    expect(problems).toEqual([
      { path: 'conditions.assigned_to', message: 'is not a user of this company' },
      { path: 'actions.0.assigned_to', message: 'is not a user of this company' },
      { path: 'actions.1.stage_id', message: 'is not a stage of this company' },
      { path: 'actions.1.status_id', message: 'is not a status of this company' },
      { path: 'actions.2.url', message: 'must not point to a private address' },
    ]);
    expect(automations.size).toBe(0);
  });

  it('update checks the new references, changes the rule, and is a 404 for a rule not of the company', async () => {
    const { deps, automations, calls } = world();
    const service = new AutomationsService(deps);
    const created = await service.create('cmp_1', validBody);

    expect(
      await problemsOf(
        service.update('cmp_1', created._id, { actions: [{ type: 'update_item', status_id: 'sts_gone' }] }),
      ),
    ).toEqual([{ path: 'actions.0.status_id', message: 'is not a status of this company' }]);
    expect(automations.get(created._id)?.actions).toEqual(validBody.actions);

    const updated = await service.update('cmp_1', created._id, { name: 'Renamed', conditions: null, enabled: false });
    expect(updated).toMatchObject({
      _id: created._id,
      name: 'Renamed',
      conditions: null,
      enabled: false,
      actions: validBody.actions,
    });
    expect(automations.get(created._id)).toEqual(updated);

    // Unknown, or another company's: 404 before any reference is looked at.
    calls.length = 0;
    const invalid = { conditions: { assigned_to: 'usr_nobody' } };
    await expect(service.update('cmp_2', created._id, invalid)).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.update('cmp_1', 'aut_missing', invalid)).rejects.toThrow('Automation not found');
    expect(calls).toEqual([]);
  });

  it('remove hides the rule from reads and writes; a second remove, or one of another company, is a 404', async () => {
    const { deps } = world();
    const service = new AutomationsService(deps);
    const kept = await service.create('cmp_1', validBody);
    const removed = await service.create('cmp_1', { ...validBody, name: 'Old rule' });
    const theirs = await service.create('cmp_2', {
      ...validBody,
      conditions: {},
      actions: [{ type: 'webhook', url: 'https://hooks.example/theirs' }],
    });

    await expect(service.remove('cmp_1', theirs._id)).rejects.toBeInstanceOf(NotFoundError);
    await service.remove('cmp_1', removed._id);
    await expect(service.remove('cmp_1', removed._id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.update('cmp_1', removed._id, { name: 'Back' })).rejects.toBeInstanceOf(NotFoundError);
    expect((await service.list('cmp_1')).map((doc) => doc._id)).toEqual([kept._id]);
    expect((await service.list('cmp_2')).map((doc) => doc._id)).toEqual([theirs._id]);
  });

  it('hands runs and the webhook secret through, scoped by company', async () => {
    const { deps, calls } = world();
    const service = new AutomationsService(deps);
    expect(await service.listRuns('cmp_1', 'aut_x', 20)).toEqual([]);
    expect(calls).toEqual(['automations.listRuns cmp_1 aut_x 20']);
    expect(await service.webhookSecret('cmp_2')).toBe('whsec_of_cmp_2');
  });
});
