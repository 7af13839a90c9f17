import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { EventEnvelope } from '../events/envelope.js';

/** `whsec_` + base64 of 24 random bytes: the Standard Webhooks secret format receivers' libraries accept. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** What a receiver gets: the envelope without internal bookkeeping (`depth` only bounds automation chains). */
export function webhookBody(event: EventEnvelope): string {
  const { depth: _depth, ...payload } = event;
  return JSON.stringify(payload);
}

/**
 * Standard Webhooks headers for one attempt. Signed with the `standardwebhooks` library itself, so the
 * signature is byte-compatible with every receiver that verifies with it: `v1,` + base64
 * HMAC-SHA256 over `${id}.${timestamp}.${body}` keyed with the secret's decoded bytes.
 */
export function signedHeaders(secret: string, messageId: string, body: string, at: Date): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'pipeline-records-webhooks/1',
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(messageId, at, body),
  };
}
