import { describe, expect, it } from 'vitest';
import { knownChangeFields } from './change-fields.js';
import { judgeChangeFilter, passesChangeFilter } from './change-filter.js';
import type { PipelineDoc } from '../contracts/pipelines.js';

const moved = { type: 'item.updated', changes: { stage: { from: 'stg_lead', to: 'stg_won' } } };
const renamed = { type: 'item.updated', changes: { name: { from: 'Acme', to: 'Acme 2027' } } };

describe('filter.changes judged from the event alone', () => {
  it('an *.updated event passes when its changes name one of the fields, with the given values', () => {
    expect(passesChangeFilter([{ field: 'stage' }], moved)).toBe(true);
    expect(passesChangeFilter([{ field: 'stage' }], renamed)).toBe(false);
    expect(passesChangeFilter([{ field: 'stage', to: 'stg_won' }], moved)).toBe(true);
    expect(passesChangeFilter([{ field: 'stage', to: 'stg_lead' }], moved)).toBe(false);
    expect(passesChangeFilter([{ field: 'stage', from: 'stg_lead', to: 'stg_won' }], moved)).toBe(true);
    expect(passesChangeFilter([{ field: 'stage', from: 'stg_won' }], moved)).toBe(false);
    expect(passesChangeFilter([{ field: 'status' }, { field: 'name' }], renamed)).toBe(true);
    // A value of null is a value: `to: null` matches a cleared field only.
    const cleared = { type: 'item.updated', changes: { status: { from: 'sts_open', to: null } } };
    expect(passesChangeFilter([{ field: 'status', to: null }], cleared)).toBe(true);
    expect(
      passesChangeFilter([{ field: 'status', to: null }], { ...cleared, changes: { status: { from: null, to: 'x' } } }),
    ).toBe(false);
    expect(
      passesChangeFilter([{ field: 'tags', to: ['a', 'b'] }], {
        type: 'item.updated',
        changes: { tags: { from: [], to: ['a', 'b'] } },
      }),
    ).toBe(true);
  });

  it('other event types pass unchanged; an updated event without changes does not', () => {
    expect(passesChangeFilter([{ field: 'stage' }], { type: 'item.created' })).toBe(true);
    expect(passesChangeFilter([{ field: 'stage' }], { type: 'task.completed', changes: {} })).toBe(true);
    expect(passesChangeFilter([{ field: 'stage' }], { type: 'item.updated' })).toBe(false);
    expect(passesChangeFilter(undefined, renamed)).toBe(true);
    // A field named like an Object.prototype member is looked up as an own key only.
    expect(passesChangeFilter([{ field: 'toString' }], renamed)).toBe(false);
  });
});

const pipeline = {
  fields: [
    { name: 'deal_value', type: 'number' },
    { name: 'closes_on', type: 'date' },
  ],
} as unknown as PipelineDoc;

describe('filter.changes validated against the fields the subscribed types report', () => {
  const judge = (input: Record<string, { from?: unknown; to?: unknown }>, types = ['*'] as const) =>
    judgeChangeFilter(input, knownChangeFields([...types], [pipeline]), [...types]);

  it('knows task fields, item fields and custom fields by name; refuses others with their path', () => {
    expect(judge({ stage: {}, deal_value: { to: 5 }, priority: { to: 'high' } }).problems).toEqual([]);
    expect(judge({ colour: {} }).problems).toEqual([
      { path: 'filter.changes.colour', message: expect.stringContaining('not a field') },
    ]);
    // Item fields are not task.updated's, and created_at or version never change.
    expect(
      judgeChangeFilter({ stage: {} }, knownChangeFields(['task.updated'], [pipeline]), ['task.updated']).problems,
    ).toHaveLength(1);
    expect(judge({ version: {} }).problems).toHaveLength(1);
  });

  it('refuses a value of the wrong type for its field and normalises timestamps', () => {
    expect(judge({ deal_value: { to: 'lots' } }).problems).toEqual([
      { path: 'filter.changes.deal_value.to', message: expect.any(String) },
    ]);
    expect(judge({ priority: { from: 'sky-high' } }).problems[0]?.path).toBe('filter.changes.priority.from');
    expect(judge({ is_completed: { to: 'yes' } }).problems).toHaveLength(1);
    const { conditions } = judge({ due_at: { to: '2030-01-01T12:00:00+02:00' } });
    expect(conditions).toEqual([{ field: 'due_at', to: '2030-01-01T10:00:00.000Z' }]);
  });

  it('a hook without an *.updated type cannot filter on changes', () => {
    const result = judgeChangeFilter({ stage: {} }, knownChangeFields(['item.created'], []), ['item.created']);
    expect(result.problems.map((problem) => problem.path)).toEqual(['filter.changes']);
  });
});
