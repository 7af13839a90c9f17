import { newId } from '../../src/shared/ids.js';
import type { TaskDoc } from '../../src/contracts/tasks.js';
import type { Db } from 'mongodb';

/** Open tasks written straight through the driver (as the API would store them), for scans over hundreds of tasks. */
export async function insertOpenTasks(db: Db, companyId: string, userId: string, dueTimes: Date[]): Promise<string[]> {
  const createdAt = new Date();
  const docs: TaskDoc[] = dueTimes.map((dueAt, index) => ({
    _id: newId('task'),
    company_id: companyId,
    title: `Task ${index}`,
    due_at: dueAt,
    assigned_to: userId,
    description: null,
    priority: 'none',
    task_type: 'to_do',
    item_id: null,
    duration_minutes: null,
    reminder_minutes: null,
    notes: null,
    is_completed: false,
    created_by: userId,
    completed_at: null,
    created_at: createdAt,
    updated_at: createdAt,
    revision: 1,
    overdue_fired_for: null,
  }));
  await db.collection<TaskDoc>('tasks').insertMany(docs);
  return docs.map((doc) => doc._id);
}
