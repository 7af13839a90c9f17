import { describe, expect, expectTypeOf, it } from 'vitest';
import { buildCompanyEvent, isTaskEvent, typedEvent } from './company-events.js';
import type { ItemResponse } from './items.js';
import type { TaskResponse } from './tasks.js';

const SYSTEM = { actor: { type: 'system' as const } };
const task = { task_id: 'tsk_1', created_by: 'usr_1' } as TaskResponse;

describe('company events typed by kind', () => {
  it("a consumer that checks the type gets data as that type's resource", () => {
    const event = typedEvent(buildCompanyEvent('task.updated', 'cmp_1', task, SYSTEM));
    expect(isTaskEvent(event)).toBe(true);
    if (isTaskEvent(event)) expectTypeOf(event.data).toEqualTypeOf<TaskResponse>();
    if (event.type === 'item.deleted') expectTypeOf(event.data).toEqualTypeOf<ItemResponse>();
    expect(event.data.task_id).toBe('tsk_1');
  });

  it('an item event is not a task event', () => {
    const event = typedEvent(buildCompanyEvent('item.created', 'cmp_1', { item_id: 'itm_1' } as ItemResponse, SYSTEM));
    expect(isTaskEvent(event)).toBe(false);
    // @ts-expect-error a task event's data must be a task
    buildCompanyEvent('task.created', 'cmp_1', { item_id: 'itm_1' } as ItemResponse, SYSTEM);
  });
});
