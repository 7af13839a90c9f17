import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ERASURE_STEPS, type ErasureStores } from './collections.js';
import { runErasure, type ErasureJobDeps } from './job.js';
import type { EventEnvelope } from '../contracts/envelope.js';
import type { DeliveryJob, EventJobData } from '../contracts/jobs.js';
import type { QueuedCopies } from './queued-copies.js';
import type { ErasureDoc } from './repository.js';

type ErasuresPort = ErasureJobDeps['repos']['erasures'];

/** The erasures store as the job uses it, in memory, scoped by company and with the real one's conditions. */
class FakeErasures implements ErasuresPort {
  readonly docs = new Map<string, ErasureDoc>();

  constructor(private readonly log: string[]) {}

  private of(companyId: string, erasureId: string): ErasureDoc | undefined {
    const doc = this.docs.get(erasureId);
    return doc?.company_id === companyId ? doc : undefined;
  }

  async start(companyId: string, erasureId: string): Promise<ErasureDoc | null> {
    this.log.push('erasures.start');
    const doc = this.of(companyId, erasureId);
    if (!doc || doc.status === 'completed') return null;
    Object.assign(doc, { status: 'running', started_at: new Date(), runs: doc.runs + 1 });
    return structuredClone(doc);
  }

  async findById(companyId: string, erasureId: string): Promise<ErasureDoc | null> {
    this.log.push('erasures.findById');
    const doc = this.of(companyId, erasureId);
    return doc ? structuredClone(doc) : null;
  }

  async stepDone(companyId: string, erasureId: string, step: string): Promise<void> {
    this.log.push(`erasures.stepDone ${step}`);
    const doc = this.of(companyId, erasureId);
    if (doc && !doc.steps_done.includes(step)) doc.steps_done.push(step);
  }

  async complete(companyId: string, erasureId: string): Promise<boolean> {
    this.log.push('erasures.complete');
    const doc = this.of(companyId, erasureId);
    if (!doc || doc.status === 'completed') return false;
    Object.assign(doc, { status: 'completed', completed_at: new Date() });
    return true;
  }
}

/** A kept BullMQ job as erasure sees it: its data, replaced in place. */
class KeptJob<Data> {
  constructor(public data: Data) {}
  async updateData(data: Data): Promise<void> {
    this.data = data;
  }
}

const envelope = (eventId: string, recordId: string): EventEnvelope => ({
  event_id: eventId,
  type: 'item.updated',
  company_id: 'cmp_1',
  occurred_at: '2026-11-24T09:00:00.000Z',
  actor: { type: 'api_key', id: 'key_1' },
  data: { item_id: recordId, name: `name of ${recordId}` },
  changes: { name: { from: 'before', to: `name of ${recordId}` } },
});

/**
 * The job's world in memory: one erasure of item itm_1 (events evt_1 and evt_2 about it, evt_late recorded while
 * the first pass runs), stores that log what the steps ask of them, and the kept jobs of the three queues.
 */
function world() {
  const log: string[] = [];
  const erasures = new FakeErasures(log);
  erasures.docs.set('era_1', {
    _id: 'era_1',
    company_id: 'cmp_1',
    kind: 'item',
    record_id: 'itm_1',
    status: 'queued',
    steps_done: [],
    runs: 0,
    requested_at: new Date('2026-11-24T09:00:00Z'),
    started_at: null,
    completed_at: null,
  });
  let idsRead = 0;
  const stores: ErasureStores = {
    events: {
      async idsAbout(companyId, recordId) {
        log.push(`events.idsAbout ${companyId} ${recordId}`);
        // The second read (after the first pass) finds an event recorded meanwhile.
        return idsRead++ === 0 ? ['evt_1', 'evt_2'] : ['evt_1', 'evt_2', 'evt_late'];
      },
      async eraseAbout(companyId, recordId) {
        log.push(`events.eraseAbout ${companyId} ${recordId}`);
      },
      async jobIdsAbout(companyId, recordId) {
        log.push(`events.jobIdsAbout ${companyId} ${recordId}`);
        return ['batch-evt_1', 'evt_2'];
      },
      async unsequencedAbout() {
        log.push('events.unsequencedAbout');
        return false;
      },
    },
    deliveries: {
      async jobIdsOf(companyId, eventIds) {
        log.push(`deliveries.jobIdsOf ${companyId} ${eventIds.join(',')}`);
        return ['dlv_1', 'dlv_gone'];
      },
      async eraseEvents(companyId, eventIds) {
        log.push(`deliveries.eraseEvents ${companyId} ${eventIds.join(',')}`);
      },
    },
    history: {
      async eraseRecord(companyId, recordId) {
        log.push(`history.eraseRecord ${companyId} ${recordId}`);
        return 2;
      },
    },
    apiKeys: {
      async list(companyId) {
        log.push(`apiKeys.list ${companyId}`);
        return [{ _id: 'key_1' }];
      },
    },
    idempotency: {
      async eraseMentioning(keyIds, recordId) {
        log.push(`idempotency.eraseMentioning ${keyIds.join(',')} ${recordId}`);
      },
    },
    items: {
      async erase(companyId, recordId) {
        log.push(`items.erase ${companyId} ${recordId}`);
      },
    },
    tasks: {
      async erase(companyId, recordId) {
        log.push(`tasks.erase ${companyId} ${recordId}`);
      },
    },
  };
  const eventJobs = {
    automations: new Map<string, KeptJob<EventJobData>>([
      [
        'batch-evt_1',
        new KeptJob<EventJobData>({ events: [envelope('evt_1', 'itm_1'), envelope('evt_other', 'itm_2')] }),
      ],
    ]),
    'hook-fanout': new Map<string, KeptJob<EventJobData>>([
      ['evt_2', new KeptJob<EventJobData>(envelope('evt_2', 'itm_1'))],
    ]),
  };
  const deliveryJobs = new Map<string, KeptJob<DeliveryJob>>([
    [
      'dlv_1',
      new KeptJob<DeliveryJob>({ event: envelope('evt_1', 'itm_1'), target: { kind: 'hook', hook_id: 'hk_1' } }),
    ],
  ]);
  const getJobs: string[] = [];
  const queues: QueuedCopies = {
    automations: {
      async getJob(jobId) {
        getJobs.push(`automations ${jobId}`);
        return eventJobs.automations.get(jobId);
      },
    },
    'hook-fanout': {
      async getJob(jobId) {
        getJobs.push(`hook-fanout ${jobId}`);
        return eventJobs['hook-fanout'].get(jobId);
      },
    },
    deliveries: {
      async getJob(jobId) {
        getJobs.push(`deliveries ${jobId}`);
        return deliveryJobs.get(jobId);
      },
    },
  };
  const logLines: Array<Record<string, unknown>> = [];
  const deps: ErasureJobDeps = {
    repos: { ...stores, erasures },
    queues,
    logger: pino({ level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line)) }),
    settleMs: 0,
  };
  return { deps, log, erasures, eventJobs, deliveryJobs, getJobs, logLines };
}

/** What one pass of the steps asks of the stores for itm_1, given the event ids it read. */
const pass = (eventIds: string) => [
  'events.eraseAbout cmp_1 itm_1',
  `deliveries.eraseEvents cmp_1 ${eventIds}`,
  'history.eraseRecord cmp_1 itm_1',
  'apiKeys.list cmp_1',
  'idempotency.eraseMentioning key_1 itm_1',
  'items.erase cmp_1 itm_1',
];
const queuedCopies = (eventIds: string) => ['events.jobIdsAbout cmp_1 itm_1', `deliveries.jobIdsOf cmp_1 ${eventIds}`];
/** An erased event as a kept job holds it afterwards: its place, none of its values. */
function blanked(eventId: string) {
  const { changes: _changes, data: _data, ...place } = envelope(eventId, 'itm_1');
  return { ...place, data: {}, erased: true };
}

describe('runErasure', () => {
  it('runs every step, marking each done, then the queued copies; then both again with the events found since; completes once', async () => {
    const { deps, log, erasures, logLines } = world();
    expect(await runErasure(deps, 'cmp_1', 'era_1')).toBe('completed');

    const firstPass = pass('evt_1,evt_2');
    const marked = ERASURE_STEPS.map((step) => `erasures.stepDone ${step.collection}`);
    expect(marked).toEqual([
      'erasures.stepDone events',
      'erasures.stepDone deliveries',
      'erasures.stepDone record_history',
      'erasures.stepDone idempotency_keys',
      'erasures.stepDone items',
      'erasures.stepDone tasks',
    ]);
    expect(log).toEqual([
      'erasures.start',
      'events.idsAbout cmp_1 itm_1',
      firstPass[0],
      marked[0],
      firstPass[1],
      marked[1],
      firstPass[2],
      marked[2],
      firstPass[3],
      firstPass[4],
      marked[3],
      firstPass[5],
      marked[4],
      marked[5], // an item erasure: the tasks step erases nothing
      ...queuedCopies('evt_1,evt_2'),
      'events.idsAbout cmp_1 itm_1',
      ...pass('evt_1,evt_2,evt_late'),
      ...queuedCopies('evt_1,evt_2,evt_late'),
      'erasures.complete',
    ]);
    expect(erasures.docs.get('era_1')).toMatchObject({
      status: 'completed',
      runs: 1,
      steps_done: ERASURE_STEPS.map((step) => step.collection),
      completed_at: expect.any(Date),
    });
    expect(logLines.filter((line) => line.msg === 'erasure completed')).toEqual([
      expect.objectContaining({ erasure_id: 'era_1', company_id: 'cmp_1', kind: 'item' }),
    ]);
  });

  it("blanks the erased events in the queues' kept jobs, leaving other events and missing jobs alone", async () => {
    const { deps, eventJobs, deliveryJobs, getJobs } = world();
    await runErasure(deps, 'cmp_1', 'era_1');
    expect(eventJobs.automations.get('batch-evt_1')?.data).toStrictEqual({
      events: [blanked('evt_1'), envelope('evt_other', 'itm_2')],
    });
    expect(eventJobs['hook-fanout'].get('evt_2')?.data).toStrictEqual(blanked('evt_2'));
    expect(deliveryJobs.get('dlv_1')?.data).toStrictEqual({
      event: blanked('evt_1'),
      target: { kind: 'hook', hook_id: 'hk_1' },
    });
    // Each pass looks for every job id in both event queues, and for the deliveries' jobs.
    const onePass = [
      'automations batch-evt_1',
      'automations evt_2',
      'hook-fanout batch-evt_1',
      'hook-fanout evt_2',
      'deliveries dlv_1',
      'deliveries dlv_gone',
    ];
    expect(getJobs).toEqual([...onePass, ...onePass]);
  });

  it("a second run reports 'already completed' and erases nothing; an unknown erasure, or another company's, 'unknown'", async () => {
    const { deps, log, logLines } = world();
    await runErasure(deps, 'cmp_1', 'era_1');
    log.length = 0;
    expect(await runErasure(deps, 'cmp_1', 'era_1')).toBe('already completed');
    expect(log).toEqual(['erasures.start', 'erasures.findById']);

    log.length = 0;
    expect(await runErasure(deps, 'cmp_1', 'era_missing')).toBe('unknown');
    expect(await runErasure(deps, 'cmp_2', 'era_1')).toBe('unknown');
    expect(log).toEqual(['erasures.start', 'erasures.findById', 'erasures.start', 'erasures.findById']);
    expect(logLines.filter((line) => line.msg === 'erasure completed')).toHaveLength(1);
  });

  it("of two runs at once (a stalled job run again while the first goes on), only the one that completes reports 'completed'", async () => {
    const { deps, erasures, logLines } = world();
    const outcomes: string[] = [];
    const first: ErasureJobDeps = {
      ...deps,
      afterStep: async (collection) => {
        if (collection === 'events') outcomes.push(`second: ${await runErasure(deps, 'cmp_1', 'era_1')}`);
      },
    };
    outcomes.push(`first: ${await runErasure(first, 'cmp_1', 'era_1')}`);
    expect(outcomes).toEqual(['second: completed', 'first: already completed']);
    expect(erasures.docs.get('era_1')).toMatchObject({ status: 'completed', runs: 2 });
    expect(logLines.filter((line) => line.msg === 'erasure completed')).toHaveLength(1);
  });

  it('a run that died halfway leaves its steps marked; the next run does them all again and completes', async () => {
    const { deps, log, erasures } = world();
    const dying: ErasureJobDeps = {
      ...deps,
      afterStep: (collection) => {
        if (collection === 'deliveries') throw new Error('worker killed');
      },
    };
    await expect(runErasure(dying, 'cmp_1', 'era_1')).rejects.toThrow('worker killed');
    expect(erasures.docs.get('era_1')).toMatchObject({
      status: 'running',
      runs: 1,
      steps_done: ['events', 'deliveries'],
    });
    expect(log).not.toContain('erasures.complete');

    log.length = 0;
    expect(await runErasure(deps, 'cmp_1', 'era_1')).toBe('completed');
    expect(log.filter((call) => call.startsWith('events.eraseAbout'))).toHaveLength(2);
    expect(erasures.docs.get('era_1')).toMatchObject({
      status: 'completed',
      runs: 2,
      steps_done: ERASURE_STEPS.map((step) => step.collection),
    });
  });
});
