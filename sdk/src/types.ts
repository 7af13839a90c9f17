import type { components, paths, webhooks } from './generated/api.js';

/** Every schema of the API, by name: `Schemas['Item']`, `Schemas['Task']`, `Schemas['Hook']`, ... */
export type Schemas = components['schemas'];
export type Item = Schemas['Item'];
export type Task = Schemas['Task'];
export type Hook = Schemas['Hook'];
export type Pipeline = Schemas['Pipeline'];
/** One event of the feed (`GET /v1/ext/events`), the same envelope a webhook carries. */
export type FeedEvent = Schemas['Event'];

/** An RFC 9457 problem as the API sends it, with `code` one of the documented codes. */
export type Problem = Schemas['Problem'];
/** Every error `code` the API answers with (`/docs/errors`). */
export type ProblemCode = Problem['code'];

/** A webhook's body, by event type: `WebhookEvent<'task.created'>`; the union of all without a type. */
export type WebhookEventType = keyof webhooks;
export type WebhookEvent<T extends WebhookEventType = WebhookEventType> = {
  [K in T]: webhooks[K]['post']['requestBody']['content']['application/json'];
}[T];

/** The paths whose GET answers a JSON array: the lists, paged with `cursor` and `x-next-cursor`. */
export type ListPath = {
  [P in keyof paths]: paths[P] extends {
    get: { responses: { 200: { content: { 'application/json': readonly unknown[] } } } };
  }
    ? P
    : never;
}[keyof paths];

/** What one list yields: `ListRecord<'/v1/ext/items'>` is `Item`. */
export type ListRecord<P extends ListPath> = paths[P] extends {
  get: { responses: { 200: { content: { 'application/json': ReadonlyArray<infer R> } } } };
}
  ? R
  : never;

export type { components, operations, paths, webhooks } from './generated/api.js';
