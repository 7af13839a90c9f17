import { describe, expect, it } from 'vitest';
import { DEFAULT_DUPLICATE_DETECTION } from '../contracts/pipelines.js';
import { checkAgainstPipeline, mergeCustom } from './service.js';
import type { PipelineDoc } from '../contracts/pipelines.js';

const at = new Date('2026-11-24T09:00:00Z');
const pipeline: PipelineDoc = {
  _id: 'pip_1',
  company_id: 'cmp_1',
  name: 'Sales',
  stages: [{ stage_id: 'stg_1', name: 'New', position: 0 }],
  statuses: [{ status_id: 'sts_1', name: 'Open' }],
  fields: [
    { name: 'deal_value', type: 'number', required: true },
    { name: 'industry', type: 'text', required: false },
  ],
  duplicate_detection: DEFAULT_DUPLICATE_DETECTION,
  revision: 1,
  created_at: at,
  updated_at: at,
};

describe('checkAgainstPipeline', () => {
  it('reports every problem of position and values at once', () => {
    const { problems } = checkAgainstPipeline(
      pipeline,
      { stage_id: 'stg_other', status_id: 'sts_other', metadata: { deal_value: 'a lot', colour: 'red' } },
      'create',
    );
    expect(problems.map((problem) => problem.path).sort()).toEqual([
      'metadata.colour',
      'metadata.deal_value',
      'stage_id',
      'status_id',
    ]);
  });

  it('returns the validated values when all is well; a required field may be left out of an update', () => {
    expect(checkAgainstPipeline(pipeline, { stage_id: 'stg_1', metadata: { deal_value: 5 } }, 'create')).toEqual({
      custom: { deal_value: 5 },
      problems: [],
    });
    expect(checkAgainstPipeline(pipeline, { metadata: { industry: 'Retail' } }, 'update').problems).toEqual([]);
    expect(checkAgainstPipeline(pipeline, { metadata: {} }, 'create').problems.map((p) => p.path)).toEqual([
      'metadata.deal_value',
    ]);
  });
});

describe('mergeCustom', () => {
  it('sets given values, removes those set to null, keeps the rest, and treats any name as an own key', () => {
    const merged = mergeCustom({ deal_value: 5, industry: 'Retail' }, { industry: null, toString: 'x', deal_value: 7 });
    expect({ ...merged }).toEqual({ deal_value: 7, toString: 'x' });
    expect(Object.getPrototypeOf(merged)).toBeNull();
  });
});
