import { describe, expect, it } from 'vitest';
import { storedTaskDoc } from '../contracts/tasks.test-support.js';
import { changesFrom } from './service.js';
import type { TaskDoc } from '../contracts/tasks.js';

const now = new Date('2026-11-24T10:00:00Z');
const due = new Date('2026-11-24T09:00:00Z');
const task: TaskDoc = storedTaskDoc({
  _id: 'tsk_1',
  title: 'Call',
  due_at: due,
  created_at: due,
  overdue_fired_for: due,
});

describe('changesFrom (a task PATCH)', () => {
  it('keeps only supplied fields and stores an empty note as null', () => {
    expect(changesFrom(task, { title: 'Call back', description: undefined, notes: '  ' }, now)).toEqual({
      title: 'Call back',
      notes: null,
    });
  });

  it('sets completed_at with is_completed, clears it on reopening, and ignores a no-op', () => {
    expect(changesFrom(task, { is_completed: true }, now)).toEqual({ is_completed: true, completed_at: now });
    expect(changesFrom({ ...task, is_completed: true, completed_at: now }, { is_completed: false }, now)).toEqual({
      is_completed: false,
      completed_at: null,
    });
    expect(changesFrom(task, { is_completed: false }, now)).toEqual({});
  });

  it('re-arms task.overdue for a new due time but not for one it already fired for', () => {
    const later = new Date('2026-11-25T09:00:00Z');
    expect(changesFrom(task, { due_at: later }, now)).toMatchObject({ due_at: later, overdue_fired_for: null });
    const movedBack = { ...task, due_at: later, overdue_fired_for: null, overdue_fired_dues: [due] };
    expect(changesFrom(movedBack, { due_at: due }, now)).toMatchObject({ due_at: due, overdue_fired_for: due });
  });
});
