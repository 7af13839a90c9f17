import { createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhookEvent } from './types.js';

export type WebhookVerificationFailure =
  'missing_headers' | 'bad_timestamp' | 'timestamp_too_old' | 'timestamp_too_new' | 'no_matching_signature';

export class WebhookVerificationError extends Error {
  readonly reason: WebhookVerificationFailure;
  constructor(reason: WebhookVerificationFailure) {
    super(`webhook not verified: ${reason}`);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}

export interface VerifyOptions {
  /** The hook's secret (`whsec_...`); during a rotation, both the new and the old. */
  secret: string | readonly string[];
  /** The request's headers: a fetch `Headers`, or Node's `IncomingHttpHeaders`. */
  headers: Headers | Record<string, string | string[] | undefined>;
  /** The raw body, byte for byte as received (not re-serialized JSON). */
  body: string | Uint8Array;
  /** How far `webhook-timestamp` may be from now (default 300 s): older deliveries are refused as replays. */
  toleranceSeconds?: number;
  now?: Date;
}

function header(headers: VerifyOptions['headers'], name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const value = (headers as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Standard Webhooks verification: the signature is `v1,` + base64 HMAC-SHA256 of
 * `${webhook-id}.${webhook-timestamp}.${body}`, keyed with the base64-decoded part of the secret after
 * `whsec_`; `webhook-signature` may hold several, space-separated, and one matching is enough. Returns
 * the parsed event; throws WebhookVerificationError otherwise. Dedupe by `webhook-id` (the event id).
 */
export function verifyWebhook(options: VerifyOptions): WebhookEvent {
  const id = header(options.headers, 'webhook-id');
  const timestamp = header(options.headers, 'webhook-timestamp');
  const signatures = header(options.headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('missing_headers');
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('bad_timestamp');
  const skew = Math.floor((options.now ?? new Date()).getTime() / 1000) - Number(timestamp);
  const tolerance = options.toleranceSeconds ?? 300;
  if (skew > tolerance) throw new WebhookVerificationError('timestamp_too_old');
  if (skew < -tolerance) throw new WebhookVerificationError('timestamp_too_new');

  const body = typeof options.body === 'string' ? Buffer.from(options.body) : Buffer.from(options.body);
  const secrets = typeof options.secret === 'string' ? [options.secret] : options.secret;
  const expected = secrets.map((secret) =>
    createHmac('sha256', Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64'))
      .update(`${id}.${timestamp}.`)
      .update(body)
      .digest(),
  );
  const matches = signatures.split(' ').some((candidate) => {
    const [version, value] = candidate.split(',', 2);
    if (version !== 'v1' || !value) return false;
    const given = Buffer.from(value, 'base64');
    return expected.some((digest) => digest.length === given.length && timingSafeEqual(digest, given));
  });
  if (!matches) throw new WebhookVerificationError('no_matching_signature');
  return JSON.parse(body.toString('utf8')) as WebhookEvent;
}
