import { NotFoundError, ValidationError } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { generateApiKey } from './key-material.js';
import type { ApiKeyDoc, ApiKeysRepository } from './api-keys.repository.js';
import type { createApiKeyBody } from './api-keys.schemas.js';
import type { ApiKeyAuthenticator } from './authenticator.js';
import type { z } from 'zod';

export interface ApiKeysServiceDeps {
  apiKeys: Pick<ApiKeysRepository, 'insert' | 'list' | 'rename' | 'revoke'>;
  /** The users feature's lookup: whether the key's creator is a user of the company. */
  users: { findById(companyId: string, userId: string): Promise<{ _id: string } | null> };
  authenticator: Pick<ApiKeyAuthenticator, 'keyChanged'>;
  /** The key's hooks are disabled with it (DECISIONS.md section 13.4). */
  hooks: { disableForRevokedKey(companyId: string, keyId: string, at: Date): Promise<number> };
}

/** API keys as the admin API issues them: only the hash is stored, the key itself is shown once. */
export class ApiKeysService {
  constructor(private readonly deps: ApiKeysServiceDeps) {}

  async create(companyId: string, body: z.infer<typeof createApiKeyBody>): Promise<{ doc: ApiKeyDoc; key: string }> {
    const creator = await this.deps.users.findById(companyId, body.created_by);
    if (!creator) throw ValidationError.single('created_by', 'is not a user of this company');
    const material = generateApiKey();
    const doc: ApiKeyDoc = {
      _id: newId('apiKey'),
      company_id: companyId,
      name: body.name,
      prefix: material.displayPrefix,
      key_hash: material.hash,
      scopes: body.scopes,
      expires_at: body.expires_at ?? null,
      created_by: creator._id,
      created_at: new Date(),
      last_used_at: null,
      revoked_at: null,
    };
    await this.deps.apiKeys.insert(doc);
    return { doc, key: material.value };
  }

  list(companyId: string): Promise<ApiKeyDoc[]> {
    return this.deps.apiKeys.list(companyId);
  }

  async rename(companyId: string, keyId: string, name: string): Promise<ApiKeyDoc> {
    const key = await this.deps.apiKeys.rename(companyId, keyId, name);
    if (!key) throw new NotFoundError('API key');
    return key;
  }

  /**
   * Revoked at once in this process; other processes hear of it over the change feed. The hooks the key
   * created are disabled in the same request, so their deliveries stop before the answer (revoking again
   * repeats that, should the first attempt have failed after the key was marked).
   */
  async revoke(companyId: string, keyId: string): Promise<void> {
    if (!(await this.deps.apiKeys.revoke(companyId, keyId))) throw new NotFoundError('API key');
    await this.deps.hooks.disableForRevokedKey(companyId, keyId, new Date());
    await this.deps.authenticator.keyChanged(keyId);
  }
}
