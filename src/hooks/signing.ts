import { createHmac, randomBytes } from 'node:crypto';
import { publicEnvelope, type EventEnvelope } from '../events/envelope.js';

/** `whsec_` + base64 of 24 random bytes: the Standard Webhooks secret format receivers' libraries accept. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** What a receiver gets: the envelope without internal bookkeeping (automation `depth`, trace context). */
export function webhookBody(event: EventEnvelope): string {
  return JSON.stringify(publicEnvelope(event));
}

/**
 * Standard Webhooks headers for one attempt: `v1,` + base64 HMAC-SHA256 over `${id}.${timestamp}.${body}`
 * keyed with the secret's decoded bytes. node:crypto rather than the `standardwebhooks` package's
 * pure-JavaScript HMAC (4% of a hooks worker's CPU); the tests verify every signature with that package.
 */
export function signedHeaders(secret: string, messageId: string, body: string, at: Date): Record<string, string> {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const key = Buffer.from(secret.slice(secret.indexOf('_') + 1), 'base64');
  const signature = createHmac('sha256', key).update(`${messageId}.${timestamp}.${body}`).digest('base64');
  return {
    'content-type': 'application/json',
    'user-agent': 'pipeline-records-webhooks/1',
    'webhook-id': messageId,
    'webhook-timestamp': timestamp,
    'webhook-signature': `v1,${signature}`,
  };
}
