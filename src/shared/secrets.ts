import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Db } from 'mongodb';

interface SecretDoc {
  _id: string;
  value: string;
  created_at: Date;
}

/**
 * A server-side secret shared by every process through MongoDB (created once, atomically), so that
 * e.g. pagination cursors signed by one web process verify on another without extra configuration.
 */
export async function loadSharedSecret(db: Db, name: string): Promise<Buffer> {
  const secrets = db.collection<SecretDoc>('app_secrets');
  await secrets.updateOne(
    { _id: name },
    { $setOnInsert: { value: randomBytes(32).toString('base64'), created_at: new Date() } },
    { upsert: true },
  );
  const doc = await secrets.findOne({ _id: name });
  if (!doc) throw new Error(`secret ${name} missing after upsert`);
  return Buffer.from(doc.value, 'base64');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Constant-time check of `Authorization: Bearer <token>`; never true without a configured token. */
export function bearerMatches(header: string | undefined, token: string | undefined): boolean {
  const credentials = header ? /^bearer\s+(.+)$/i.exec(header)?.[1] : undefined; // the scheme is case-insensitive
  if (!token || !credentials) return false;
  return timingSafeEqual(digest(credentials.trim()), digest(token));
}
