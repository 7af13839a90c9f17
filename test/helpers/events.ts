import { taskSchema } from '../../src/tasks/schemas.js';

/**
 * A task in API shape (the reference's example) with the given fields: what an event built by a test
 * carries as `data`, so that its webhook matches the task payload schema like the service's own.
 */
export function taskData(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...(taskSchema.meta()?.example as Record<string, unknown>), ...fields };
}
