import { describe, expect, it } from 'vitest';
import { DEFAULT_DUPLICATE_DETECTION } from '../contracts/pipelines.js';
import { applyPipelineUpdate } from './service.js';
import type { PipelineDoc } from '../contracts/pipelines.js';

const at = new Date('2026-11-24T09:00:00Z');
const pipeline: PipelineDoc = {
  _id: 'pip_1',
  company_id: 'cmp_1',
  name: 'Sales',
  stages: [{ stage_id: 'stg_1', name: 'New', position: 0 }],
  statuses: [{ status_id: 'sts_1', name: 'Open' }],
  fields: [{ name: 'deal_value', type: 'number', required: false }],
  duplicate_detection: DEFAULT_DUPLICATE_DETECTION,
  revision: 1,
  created_at: at,
  updated_at: at,
};

describe('applyPipelineUpdate', () => {
  it('adds stages, statuses and fields, renames by id, and leaves the input untouched', () => {
    const updated = applyPipelineUpdate(pipeline, {
      stages: [{ stage_id: 'stg_1', name: 'Fresh' }, { name: 'Won' }],
      statuses: [{ name: 'Lost' }],
      fields: [{ name: 'industry', type: 'text', required: false }],
    });
    expect(updated.stages.map((stage) => [stage.name, stage.position])).toEqual([
      ['Fresh', 0],
      ['Won', 1],
    ]);
    expect(updated.statuses.map((status) => status.name)).toEqual(['Open', 'Lost']);
    expect(updated.fields.map((field) => field.name)).toEqual(['deal_value', 'industry']);
    expect(pipeline.stages[0]?.name).toBe('New');
  });

  it('refuses an unknown stage id and a field redefined with another type, naming each path', () => {
    expect(() =>
      applyPipelineUpdate(pipeline, {
        stages: [{ stage_id: 'stg_unknown', name: 'X' }],
        fields: [{ name: 'deal_value', type: 'text', required: false }],
      }),
    ).toThrow(
      expect.objectContaining({
        errors: [
          { path: 'stages.0.stage_id', message: 'is not a stage of this pipeline' },
          { path: 'fields.0.name', message: 'is already defined with another definition' },
        ],
      }),
    );
  });

  it('accepts a field repeated with the very same definition (a retried PATCH)', () => {
    expect(applyPipelineUpdate(pipeline, { fields: [...pipeline.fields] }).fields).toHaveLength(1);
  });
});
