import { z } from 'zod';
import { SCOPES, scopeSchema } from '../contracts/scopes.js';
import { isoTimestampInput, isoTimestampOutput, toIso } from '../shared/time.js';
import type { ApiKeyDoc } from './api-keys.repository.js';

export const apiKeySchema = z
  .object({
    key_id: z.string(),
    name: z.string(),
    prefix: z
      .string()
      .describe('First characters of the key, for recognising it; the value itself is never shown again'),
    scopes: z.array(scopeSchema),
    expires_at: isoTimestampOutput.nullable(),
    created_by: z.string(),
    created_at: isoTimestampOutput,
    last_used_at: isoTimestampOutput.nullable(),
    revoked_at: isoTimestampOutput.nullable(),
  })
  .meta({ id: 'ApiKey' });

export const createdApiKeySchema = apiKeySchema
  .pick({ key_id: true, name: true, scopes: true, expires_at: true, created_by: true, created_at: true })
  .extend({ key: z.string().describe('The key value; shown only in this response') })
  .meta({ id: 'CreatedApiKey' });

export const createApiKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  created_by: z.string().min(1),
  scopes: z
    .array(scopeSchema)
    .min(1)
    .default([...SCOPES])
    .transform((scopes) => [...new Set(scopes)]),
  expires_at: isoTimestampInput.nullable().optional(),
});

export const renameApiKeyBody = z.strictObject({ name: z.string().trim().min(1).max(200) });

export function toApiKeyResponse(doc: ApiKeyDoc): z.infer<typeof apiKeySchema> {
  return {
    key_id: doc._id,
    name: doc.name,
    prefix: doc.prefix,
    scopes: doc.scopes,
    expires_at: toIso(doc.expires_at),
    created_by: doc.created_by,
    created_at: toIso(doc.created_at),
    last_used_at: toIso(doc.last_used_at),
    revoked_at: toIso(doc.revoked_at),
  };
}
