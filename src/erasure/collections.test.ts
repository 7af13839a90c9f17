import { describe, expect, it } from 'vitest';
import { ERASURE_STEPS, type ErasureStores, type ErasureTarget } from './collections.js';

interface StoredEvent {
  event_id: string;
  company_id: string;
  record_id: string;
  data: Record<string, unknown>;
  erased?: true;
}

/**
 * Every store an erasure step touches, in memory: each holds values of records of two companies, so a test can
 * see what a step took out and what it left. `log` lists the calls in order.
 */
function stores() {
  const log: string[] = [];
  const events: StoredEvent[] = [
    { event_id: 'evt_1', company_id: 'cmp_1', record_id: 'itm_1', data: { name: 'Ada' } },
    { event_id: 'evt_2', company_id: 'cmp_1', record_id: 'itm_1', data: { name: 'Ada L.' } },
    { event_id: 'evt_3', company_id: 'cmp_1', record_id: 'itm_2', data: { name: 'Bob' } },
    { event_id: 'evt_4', company_id: 'cmp_2', record_id: 'itm_1', data: { name: 'Other company' } },
  ];
  const deliveries: Array<{ company_id: string; event_id: string; body: string | null }> = events.map((event) => ({
    company_id: event.company_id,
    event_id: event.event_id,
    body: JSON.stringify(event.data),
  }));
  let history = events.map((event) => ({ company_id: event.company_id, resource_id: event.record_id }));
  const apiKeys = [
    { company_id: 'cmp_1', _id: 'key_1' },
    { company_id: 'cmp_1', _id: 'key_2' },
    { company_id: 'cmp_2', _id: 'key_3' },
  ];
  let idempotency = [
    { key_id: 'key_1', response: 'created itm_1' },
    { key_id: 'key_2', response: 'updated itm_1' },
    { key_id: 'key_1', response: 'created itm_2' },
    { key_id: 'key_3', response: 'created itm_1' },
  ];
  const records = {
    items: new Set(['cmp_1/itm_1', 'cmp_1/itm_2', 'cmp_2/itm_1', 'cmp_1/shared_id']),
    tasks: new Set(['cmp_1/tsk_1', 'cmp_1/shared_id']),
  };
  const about = (companyId: string, recordId: string) =>
    events.filter((event) => event.company_id === companyId && event.record_id === recordId);

  const repos: ErasureStores = {
    events: {
      async idsAbout(companyId, recordId) {
        return about(companyId, recordId).map((event) => event.event_id);
      },
      async eraseAbout(companyId, recordId) {
        log.push('events.eraseAbout');
        for (const event of about(companyId, recordId)) Object.assign(event, { data: {}, erased: true });
      },
      async jobIdsAbout() {
        throw new Error('not a step: eraseQueuedCopies reads it');
      },
      async unsequencedAbout() {
        throw new Error('not a step: the job waits on it between passes');
      },
    },
    deliveries: {
      async jobIdsOf() {
        throw new Error('not a step: eraseQueuedCopies reads it');
      },
      async eraseEvents(companyId, eventIds) {
        log.push(`deliveries.eraseEvents ${eventIds.join(',')}`);
        for (const delivery of deliveries)
          if (delivery.company_id === companyId && eventIds.includes(delivery.event_id)) delivery.body = null;
      },
    },
    history: {
      async eraseRecord(companyId, recordId) {
        log.push('history.eraseRecord');
        const before = history.length;
        history = history.filter((row) => !(row.company_id === companyId && row.resource_id === recordId));
        return before - history.length;
      },
    },
    apiKeys: {
      async list(companyId) {
        return apiKeys.filter((key) => key.company_id === companyId);
      },
    },
    idempotency: {
      async eraseMentioning(keyIds, recordId) {
        log.push(`idempotency.eraseMentioning ${keyIds.join(',')}`);
        idempotency = idempotency.filter(
          (entry) => !(keyIds.includes(entry.key_id) && entry.response.includes(recordId)),
        );
      },
    },
    items: {
      async erase(companyId, recordId) {
        log.push('items.erase');
        records.items.delete(`${companyId}/${recordId}`);
      },
    },
    tasks: {
      async erase(companyId, recordId) {
        log.push('tasks.erase');
        records.tasks.delete(`${companyId}/${recordId}`);
      },
    },
  };
  const state = () => ({
    events: structuredClone(events),
    deliveries: structuredClone(deliveries),
    history: structuredClone(history),
    idempotency: structuredClone(idempotency),
    items: [...records.items].sort(),
    tasks: [...records.tasks].sort(),
  });
  return { repos, log, state };
}

/** As the job builds its target: the events' ids are read before any step runs. */
async function targetOf(repos: ErasureStores, kind: ErasureTarget['kind'], recordId: string): Promise<ErasureTarget> {
  return { companyId: 'cmp_1', kind, recordId, eventIds: await repos.events.idsAbout('cmp_1', recordId) };
}

async function runSteps(repos: ErasureStores, target: ErasureTarget, steps = ERASURE_STEPS): Promise<void> {
  for (const step of steps) await step.erase(repos, target);
}

describe('the erasure steps (ERASURE_STEPS against the stores)', () => {
  it("take one item's values out of every store, in order, the record itself last; other records and companies keep theirs", async () => {
    const { repos, log, state } = stores();
    await runSteps(repos, await targetOf(repos, 'item', 'itm_1'));

    expect(log).toEqual([
      'events.eraseAbout',
      'deliveries.eraseEvents evt_1,evt_2',
      'history.eraseRecord',
      'idempotency.eraseMentioning key_1,key_2',
      'items.erase',
    ]);
    const after = state();
    expect(after.events.map((event) => [event.event_id, event.data])).toEqual([
      ['evt_1', {}],
      ['evt_2', {}],
      ['evt_3', { name: 'Bob' }],
      ['evt_4', { name: 'Other company' }],
    ]);
    expect(after.deliveries.map((delivery) => delivery.body)).toEqual([
      null,
      null,
      '{"name":"Bob"}',
      '{"name":"Other company"}',
    ]);
    expect(after.history).toEqual([
      { company_id: 'cmp_1', resource_id: 'itm_2' },
      { company_id: 'cmp_2', resource_id: 'itm_1' },
    ]);
    // Only the company's keys: another company's idempotent answer that happens to hold the same id stays.
    expect(after.idempotency).toEqual([
      { key_id: 'key_1', response: 'created itm_2' },
      { key_id: 'key_3', response: 'created itm_1' },
    ]);
    expect(after.items).toEqual(['cmp_1/itm_2', 'cmp_1/shared_id', 'cmp_2/itm_1']);
    expect(after.tasks).toEqual(['cmp_1/shared_id', 'cmp_1/tsk_1']);
  });

  it('a task erasure erases the task, never an item that happens to have its id', async () => {
    const { repos, log, state } = stores();
    await runSteps(repos, await targetOf(repos, 'task', 'shared_id'));
    expect(log.at(-1)).toBe('tasks.erase');
    expect(log).not.toContain('items.erase');
    expect(state().items).toContain('cmp_1/shared_id');
    expect(state().tasks).toEqual(['cmp_1/tsk_1']);
  });

  it('are idempotent: a second pass changes nothing, and a run that died halfway is finished by the next', async () => {
    const clean = stores();
    await runSteps(clean.repos, await targetOf(clean.repos, 'item', 'itm_1'));
    const once = clean.state();
    await runSteps(clean.repos, await targetOf(clean.repos, 'item', 'itm_1'));
    expect(clean.state()).toEqual(once);

    const crashed = stores();
    const firstTarget = await targetOf(crashed.repos, 'item', 'itm_1');
    await runSteps(crashed.repos, firstTarget, ERASURE_STEPS.slice(0, 2));
    expect(crashed.state()).not.toEqual(once);
    // The rerun reads the event ids again, after the first run blanked the events: they keep their ids.
    await runSteps(crashed.repos, await targetOf(crashed.repos, 'item', 'itm_1'));
    expect(crashed.state()).toEqual(once);
  });
});
