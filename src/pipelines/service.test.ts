import { describe, expect, it } from 'vitest';
import { DEFAULT_DUPLICATE_DETECTION, type PipelineDoc } from '../contracts/pipelines.js';
import { NotFoundError } from '../shared/errors.js';
import { problemsOf } from '../shared/errors.test-support.js';
import { ContendedError } from '../shared/optimistic.js';
import { PipelinesService } from './service.js';

type PipelinesPort = ConstructorParameters<typeof PipelinesService>[0]['pipelines'];

const at = new Date('2026-11-24T09:00:00Z');

const storedPipeline = (id: string, companyId: string): PipelineDoc => ({
  _id: id,
  company_id: companyId,
  name: 'Sales',
  stages: [{ stage_id: 'stg_1', name: 'New', position: 0 }],
  statuses: [],
  fields: [{ name: 'deal_value', type: 'number', required: false }],
  duplicate_detection: DEFAULT_DUPLICATE_DETECTION,
  revision: 1,
  created_at: at,
  updated_at: at,
});

/**
 * The pipelines store in memory, company-scoped, its replace a compare-and-set on the revision. `rivals` are
 * admins who save first: each changes the stored pipeline just before the next replace, which then loses.
 */
function world() {
  const pipelines = new Map<string, PipelineDoc>([
    ['pip_a', storedPipeline('pip_a', 'cmp_1')],
    ['pip_other', storedPipeline('pip_other', 'cmp_2')],
  ]);
  const reads: string[] = [];
  const rivals: Array<(doc: PipelineDoc) => void> = [];
  let replaces = 0;
  const of = (companyId: string, pipelineId: string) => {
    const doc = pipelines.get(pipelineId);
    return doc?.company_id === companyId ? doc : undefined;
  };
  const port: PipelinesPort = {
    async insert(doc) {
      pipelines.set(doc._id, structuredClone(doc));
      return doc;
    },
    async findById(companyId, pipelineId) {
      reads.push(`findById ${companyId} ${pipelineId}`);
      const doc = of(companyId, pipelineId);
      return doc ? structuredClone(doc) : null;
    },
    async findCached(companyId, pipelineId) {
      reads.push(`findCached ${companyId} ${pipelineId}`);
      const doc = of(companyId, pipelineId);
      return doc ? structuredClone(doc) : null;
    },
    async list(companyId, afterId, limit = 1_000) {
      return [...pipelines.values()]
        .filter((doc) => doc.company_id === companyId && (afterId === undefined || doc._id > afterId))
        .slice(0, limit);
    },
    // A page read by its driver cursor (FindCursor), which no in-memory fake can be: not tested here.
    listCursor: () => {
      throw new Error('not used by these tests');
    },
    async replaceIfRevision(companyId, expectedRevision, next) {
      replaces++;
      const doc = of(companyId, next._id);
      const rival = rivals.shift();
      if (doc && rival) {
        rival(doc);
        doc.revision++;
      }
      if (!doc || doc.revision !== expectedRevision) return null;
      pipelines.set(next._id, structuredClone(next));
      return next;
    },
  };
  return { port, pipelines, reads, rivals, replaces: () => replaces };
}

describe('PipelinesService', () => {
  it('create refuses a field defined twice and duplicate detection on an unknown or incomparable field, storing nothing', async () => {
    const { port, pipelines } = world();
    const problems = await problemsOf(
      new PipelinesService({ pipelines: port }).create('cmp_1', {
        name: 'Hiring',
        stages: [{ name: 'Applied' }],
        statuses: [],
        fields: [
          { name: 'email', type: 'email', required: false },
          { name: 'email', type: 'text', required: false },
          { name: 'remote', type: 'boolean', required: false },
        ],
        duplicate_detection: { fields: ['name', 'phone', 'remote', 'email'], match: 'any', case_insensitive: true },
      }),
    );
    expect(problems).toEqual([
      { path: 'fields.1.name', message: 'is already defined' },
      { path: 'duplicate_detection.fields.1', message: "unknown field 'phone'" },
      { path: 'duplicate_detection.fields.2', message: 'boolean fields cannot be compared' },
    ]);
    expect(pipelines.size).toBe(2);
  });

  it('create stores the pipeline with ids for its stages (positions in order) and statuses, the default duplicate detection', async () => {
    const { port, pipelines } = world();
    const created = await new PipelinesService({ pipelines: port }).create('cmp_1', {
      name: 'Hiring',
      stages: [{ name: 'Applied' }, { name: 'Interview' }],
      statuses: [{ name: 'Open' }],
      fields: [],
    });
    expect(created).toEqual({
      _id: expect.stringMatching(/^pip_[0-9a-f]{24}$/),
      company_id: 'cmp_1',
      name: 'Hiring',
      stages: [
        { stage_id: expect.stringMatching(/^stg_[0-9a-f]{24}$/), name: 'Applied', position: 0 },
        { stage_id: expect.stringMatching(/^stg_[0-9a-f]{24}$/), name: 'Interview', position: 1 },
      ],
      statuses: [{ status_id: expect.stringMatching(/^sts_[0-9a-f]{24}$/), name: 'Open' }],
      fields: [],
      duplicate_detection: DEFAULT_DUPLICATE_DETECTION,
      revision: 1,
      created_at: expect.any(Date),
      updated_at: expect.any(Date),
    });
    expect(new Set(created.stages.map((stage) => stage.stage_id)).size).toBe(2);
    expect(pipelines.get(created._id)).toEqual(created);
  });

  it("update after another admin's save reads again and keeps their change with its own", async () => {
    const { port, pipelines, rivals, replaces } = world();
    rivals.push((doc) => doc.stages.push({ stage_id: 'stg_theirs', name: 'Theirs', position: 1 }));
    const updated = await new PipelinesService({ pipelines: port }).update('cmp_1', 'pip_a', {
      stages: [{ name: 'Mine' }],
    });
    expect(replaces()).toBe(2);
    expect(updated.stages.map((stage) => [stage.name, stage.position])).toEqual([
      ['New', 0],
      ['Theirs', 1],
      ['Mine', 2],
    ]);
    expect(updated.revision).toBe(3);
    expect(pipelines.get('pip_a')).toEqual(updated);
  });

  it('update gives up after five lost races (ContendedError, 503), and is a 404 for a pipeline not of the company', async () => {
    const { port, pipelines, rivals, replaces } = world();
    const service = new PipelinesService({ pipelines: port });
    for (let n = 0; n < 5; n++) rivals.push(() => {});
    const error = await service.update('cmp_1', 'pip_a', { name: 'Never' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ContendedError);
    expect(replaces()).toBe(5);
    expect(pipelines.get('pip_a')?.name).toBe('Sales');

    await expect(service.update('cmp_1', 'pip_other', { name: 'Mine' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.update('cmp_1', 'pip_missing', { name: 'Mine' })).rejects.toThrow('Pipeline not found');
    expect(pipelines.get('pip_other')?.name).toBe('Sales');
  });

  it('update refuses a field redefined with another type, replacing nothing', async () => {
    const { port, pipelines, replaces } = world();
    expect(
      await problemsOf(
        new PipelinesService({ pipelines: port }).update('cmp_1', 'pip_a', {
          fields: [{ name: 'deal_value', type: 'text', required: false }],
        }),
      ),
    ).toEqual([{ path: 'fields.0.name', message: 'is already defined with another definition' }]);
    expect(replaces()).toBe(0);
    expect(pipelines.get('pip_a')?.revision).toBe(1);
  });

  it('getCached reads through the cache, get from the store; both are 404 for a pipeline not of the company', async () => {
    const { port, reads } = world();
    const service = new PipelinesService({ pipelines: port });
    expect((await service.getCached('cmp_1', 'pip_a'))._id).toBe('pip_a');
    expect((await service.get('cmp_1', 'pip_a'))._id).toBe('pip_a');
    expect(reads).toEqual(['findCached cmp_1 pip_a', 'findById cmp_1 pip_a']);
    await expect(service.getCached('cmp_1', 'pip_other')).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.get('cmp_2', 'pip_a')).rejects.toBeInstanceOf(NotFoundError);
    expect((await service.list('cmp_2')).map((doc) => doc._id)).toEqual(['pip_other']);
  });
});
