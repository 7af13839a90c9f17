export { createClient } from './client.js';
export type { ClientOptions, ListInit, PipelineRecordsClient, TailOptions } from './client.js';
export { fileCursorStore, memoryCursorStore } from './cursor-store.js';
export type { CursorStore } from './cursor-store.js';
export { ApiError, ok } from './errors.js';
export type { RetryOptions } from './transport.js';
export { verifyWebhook, WebhookVerificationError } from './webhooks.js';
export type { VerifyOptions, WebhookVerificationFailure } from './webhooks.js';
export type * from './types.js';
