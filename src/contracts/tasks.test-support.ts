// Unit-test support (not built: tsconfig.build.json leaves out *.test-support.ts).
import type { TaskDoc } from './tasks.js';

/** A stored open task of `cmp_1`, assigned to and created by `usr_1`, with no optional field set. */
export function storedTaskDoc(
  fields: Pick<TaskDoc, '_id' | 'title' | 'due_at' | 'created_at'> & Partial<TaskDoc>,
): TaskDoc {
  return {
    company_id: 'cmp_1',
    assigned_to: 'usr_1',
    description: null,
    priority: 'none',
    task_type: 'call',
    item_id: null,
    duration_minutes: null,
    reminder_minutes: null,
    notes: null,
    is_completed: false,
    created_by: 'usr_1',
    completed_at: null,
    updated_at: fields.created_at,
    revision: 1,
    overdue_fired_for: null,
    ...fields,
  };
}
