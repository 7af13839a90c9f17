import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../shared/errors.js';
import { ErasureService, type ErasureServiceDeps } from './service.js';
import type { ErasureDoc, ErasureKind } from './repository.js';

type ErasuresPort = ErasureServiceDeps['erasures'];

/** The erasures store as the service uses it, in memory, scoped by company like the real one. */
class FakeErasures implements ErasuresPort {
  readonly docs: ErasureDoc[] = [];
  reads = 0;

  async insert(doc: ErasureDoc): Promise<void> {
    this.docs.push(structuredClone(doc));
  }

  async findById(companyId: string, erasureId: string): Promise<ErasureDoc | null> {
    this.reads++;
    return this.docs.find((doc) => doc.company_id === companyId && doc._id === erasureId) ?? null;
  }
}

async function expectNotFound(promise: Promise<unknown>, detail: string): Promise<void> {
  const error: unknown = await promise.then(
    () => undefined,
    (rejection: unknown) => rejection,
  );
  expect(error).toBeInstanceOf(NotFoundError);
  expect(error).toMatchObject({ status: 404, detail });
}

function world(options: { queueDown?: boolean } = {}) {
  const erasures = new FakeErasures();
  const known = new Set(['cmp_1/item/itm_1', 'cmp_1/task/tsk_1']);
  const enqueued: Array<{ erasure_id: string; company_id: string }> = [];
  const logLines: Array<Record<string, unknown>> = [];
  const deps: ErasureServiceDeps = {
    erasures,
    recordKnown: async (kind: ErasureKind, companyId: string, id: string) => known.has(`${companyId}/${kind}/${id}`),
    enqueue: async (job) => {
      if (options.queueDown) throw new Error('Redis is away');
      enqueued.push(job);
    },
    logger: pino({ level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line)) }),
  };
  return { service: new ErasureService(deps), erasures, enqueued, logLines };
}

describe('ErasureService', () => {
  it('records a queued erasure of a known item and queues its job under the erasure id', async () => {
    const { service, erasures, enqueued } = world();
    const response = await service.request('cmp_1', { item_id: 'itm_1' });
    expect(response).toMatchObject({ status: 'queued', item_id: 'itm_1', task_id: null, completed_at: null });
    expect(response.erasure_id).toMatch(/^era_[0-9a-f]{24}$/);
    expect(erasures.docs).toEqual([
      expect.objectContaining({
        _id: response.erasure_id,
        company_id: 'cmp_1',
        kind: 'item',
        record_id: 'itm_1',
        status: 'queued',
        steps_done: [],
        runs: 0,
      }),
    ]);
    expect(enqueued).toEqual([{ erasure_id: response.erasure_id, company_id: 'cmp_1' }]);
  });

  it('a task is named by task_id', async () => {
    const { service, erasures } = world();
    const response = await service.request('cmp_1', { task_id: 'tsk_1' });
    expect(response).toMatchObject({ item_id: null, task_id: 'tsk_1' });
    expect(erasures.docs[0]).toMatchObject({ kind: 'task', record_id: 'tsk_1' });
  });

  it("a record the company does not have (another company's, or a task id named as an item) is a 404; nothing is recorded or queued", async () => {
    const { service, erasures, enqueued } = world();
    await expectNotFound(service.request('cmp_2', { item_id: 'itm_1' }), 'Item not found');
    await expectNotFound(service.request('cmp_1', { item_id: 'tsk_1' }), 'Item not found');
    await expectNotFound(service.request('cmp_1', { task_id: 'tsk_9' }), 'Task not found');
    expect(erasures.docs).toEqual([]);
    expect(enqueued).toEqual([]);
  });

  it('with the queue away the request still stands (recorded, answered) and a warning says the role will queue it', async () => {
    const { service, erasures, logLines } = world({ queueDown: true });
    const response = await service.request('cmp_1', { item_id: 'itm_1' });
    expect(response.status).toBe('queued');
    expect(erasures.docs).toHaveLength(1);
    expect(logLines).toEqual([
      expect.objectContaining({
        level: 40,
        erasure_id: response.erasure_id,
        msg: 'erasure not queued yet; the erasures role will',
      }),
    ]);
  });

  it("get: the company's own erasure; another company's or an over-long id is a 404, the latter without a read", async () => {
    const { service, erasures } = world();
    const { erasure_id: erasureId } = await service.request('cmp_1', { task_id: 'tsk_1' });
    expect(await service.get('cmp_1', erasureId)).toMatchObject({ erasure_id: erasureId, task_id: 'tsk_1' });
    await expectNotFound(service.get('cmp_2', erasureId), 'Erasure not found');
    const reads = erasures.reads;
    await expectNotFound(service.get('cmp_1', 'e'.repeat(101)), 'Erasure not found');
    expect(erasures.reads).toBe(reads);
  });
});
