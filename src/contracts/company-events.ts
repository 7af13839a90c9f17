import { resourceOf } from './envelope.js';
import { buildEvent, type EventEnvelope, type EventOptions, type EventType } from './envelope.js';
import { itemSchema, type ItemResponse } from './items.js';
import type { TaskResponse } from './tasks.js';

/**
 * Company events typed by kind: `data` is the resource of the event's type, in its API shape. A union
 * discriminated by `type`, so a consumer that checks the type gets `data` typed (svix's queue/mod.rs).
 */
export type TaskEventType = Extract<EventType, `task.${string}`>;
export type ItemEventType = Extract<EventType, `item.${string}`>;
export type HookEventType = Extract<EventType, `hook.${string}`>;
/** A hook as its subscriber sees it, without its secret (src/hooks/schemas.ts toHookResponse). */
export type HookEventData = Record<string, unknown> & { hook_id: string };
export type EventDataOf<T extends EventType> = T extends TaskEventType
  ? TaskResponse
  : T extends HookEventType
    ? HookEventData
    : ItemResponse;

type EventOf<T extends EventType> = T extends EventType
  ? Omit<EventEnvelope, 'type' | 'data'> & { type: T; data: EventDataOf<T> }
  : never;
export type CompanyEvent = EventOf<EventType>;
export type TaskEvent = EventOf<TaskEventType>;
export type ItemEvent = EventOf<ItemEventType>;

/**
 * The values an envelope may replace by a TruncatedValue (capEnvelope): an item's custom fields and a
 * task's long texts. Never identifiers or core fields, so `data` always says which record to read, and
 * what automations and hook filters look at (ids, stage, type, priority, assignee) is always there.
 */
const TASK_CAPPABLE = new Set<string>(['description', 'notes'] satisfies Array<keyof TaskResponse>);
let itemCoreFields: Set<string> | undefined;
const itemCappable = (field: string): boolean =>
  !(itemCoreFields ??= new Set(Object.keys(itemSchema.shape))).has(field);
const taskCappable = (field: string): boolean => TASK_CAPPABLE.has(field);
/** Per resource; a hook event carries no value that could be large (its target_url is at most 2,000 characters). */
const CAPPABLE = { task: taskCappable, hook: () => false, item: itemCappable } as const;

/** An event of `type` about `data`; the compiler holds the data to the type's resource. Values over the cap are replaced. */
export function buildCompanyEvent<T extends EventType>(
  type: T,
  companyId: string,
  data: EventDataOf<T>,
  options: EventOptions,
): EventOf<T> {
  return buildEvent(type, companyId, data, { ...options, cappable: CAPPABLE[resourceOf(type)] }) as EventOf<T>;
}

/**
 * The typed view of an envelope off a queue or out of MongoDB. Every company event is made by
 * buildCompanyEvent, so its data is its type's resource; this is the one place that relies on it.
 * Values the cap replaced (custom fields, a task's description and notes) are TruncatedValue markers
 * despite the type: no consumer reads them.
 */
export function typedEvent(envelope: EventEnvelope): CompanyEvent {
  return envelope as CompanyEvent;
}

export function isTaskEvent(event: CompanyEvent): event is TaskEvent {
  return resourceOf(event.type) === 'task';
}
