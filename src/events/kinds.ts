import { buildEvent, type EventEnvelope, type EventOptions, type EventType } from './envelope.js';
import type { ItemResponse } from '../items/schemas.js';
import type { TaskResponse } from '../tasks/schemas.js';

/**
 * Company events typed by kind: `data` is the resource of the event's type, in its API shape. A union
 * discriminated by `type`, so a consumer that checks the type gets `data` typed (svix's queue/mod.rs).
 */
export type TaskEventType = Extract<EventType, `task.${string}`>;
export type ItemEventType = Extract<EventType, `item.${string}`>;
export type EventDataOf<T extends EventType> = T extends TaskEventType ? TaskResponse : ItemResponse;

type EventOf<T extends EventType> = T extends EventType
  ? Omit<EventEnvelope, 'type' | 'data'> & { type: T; data: EventDataOf<T> }
  : never;
export type CompanyEvent = EventOf<EventType>;
export type TaskEvent = EventOf<TaskEventType>;
export type ItemEvent = EventOf<ItemEventType>;

/** An event of `type` about `data`; the compiler holds the data to the type's resource. */
export function buildCompanyEvent<T extends EventType>(
  type: T,
  companyId: string,
  data: EventDataOf<T>,
  options: EventOptions,
): EventOf<T> {
  return buildEvent(type, companyId, data, options) as EventOf<T>;
}

/**
 * The typed view of an envelope off a queue or out of MongoDB. Every company event is made by
 * buildCompanyEvent, so its data is its type's resource; this is the one place that relies on it.
 */
export function typedEvent(envelope: EventEnvelope): CompanyEvent {
  return envelope as CompanyEvent;
}

export function isTaskEvent(event: CompanyEvent): event is TaskEvent {
  return event.type.startsWith('task.');
}
