/** The spec's closed value sets for a task; stored documents and API schemas both use them. */
export const TASK_PRIORITIES = ['none', 'low', 'medium', 'high', 'urgent'] as const;
export const TASK_TYPES = ['to_do', 'call', 'email', 'meeting', 'follow_up'] as const;

export type TaskPriority = (typeof TASK_PRIORITIES)[number];
export type TaskType = (typeof TASK_TYPES)[number];
