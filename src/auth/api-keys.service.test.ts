import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../shared/errors.js';
import { problemsOf } from '../shared/errors.test-support.js';
import { ApiKeysService, type ApiKeysServiceDeps } from './api-keys.service.js';
import { displayPrefixOf, hashApiKey, isWellFormedApiKey } from './key-material.js';
import type { ApiKeyDoc } from './api-keys.repository.js';

const at = new Date('2026-11-24T09:00:00Z');

const storedKey = (id: string, companyId: string, name = id): ApiKeyDoc => ({
  _id: id,
  company_id: companyId,
  name,
  prefix: 'prk_stored00',
  key_hash: `hash of ${id}`,
  scopes: ['items:read'],
  expires_at: null,
  created_by: 'usr_1',
  created_at: at,
  last_used_at: null,
  revoked_at: null,
});

/** The service's ports in memory: keys of two companies, users of two companies, and a log of what it told others. */
function world() {
  const keys = new Map<string, ApiKeyDoc>([
    ['key_a', storedKey('key_a', 'cmp_1', 'CRM sync')],
    ['key_b', storedKey('key_b', 'cmp_1', 'Reporting')],
    ['key_other', storedKey('key_other', 'cmp_2', 'Other company')],
  ]);
  const users = new Map([
    ['usr_1', 'cmp_1'],
    ['usr_2', 'cmp_2'],
  ]);
  const log: string[] = [];
  const ofCompany = (companyId: string, keyId: string) => {
    const key = keys.get(keyId);
    return key?.company_id === companyId ? key : undefined;
  };
  const deps: ApiKeysServiceDeps = {
    apiKeys: {
      async insert(doc) {
        if (keys.has(doc._id)) throw new Error(`duplicate key ${doc._id}`);
        keys.set(doc._id, structuredClone(doc));
      },
      async list(companyId) {
        return [...keys.values()].filter((key) => key.company_id === companyId).map((key) => structuredClone(key));
      },
      async rename(companyId, keyId, name) {
        const key = ofCompany(companyId, keyId);
        if (!key) return null;
        key.name = name;
        return structuredClone(key);
      },
      async revoke(companyId, keyId) {
        const key = ofCompany(companyId, keyId);
        if (!key) return false;
        key.revoked_at ??= new Date();
        log.push(`apiKeys.revoke ${companyId} ${keyId}`);
        return true;
      },
    },
    users: {
      async findById(companyId, userId) {
        return users.get(userId) === companyId ? { _id: userId } : null;
      },
    },
    hooks: {
      async disableForRevokedKey(companyId, keyId, when) {
        expect(when).toBeInstanceOf(Date);
        log.push(`hooks.disableForRevokedKey ${companyId} ${keyId}`);
        return 2;
      },
    },
    authenticator: {
      async keyChanged(keyId) {
        log.push(`authenticator.keyChanged ${keyId}`);
      },
    },
  };
  return { deps, keys, log };
}

const body = (createdBy: string) => ({ name: 'Zapier', created_by: createdBy, scopes: ['tasks:read' as const] });

describe('ApiKeysService', () => {
  it('create refuses a creator who is not a user of the company (another company’s user included), storing nothing', async () => {
    const { deps, keys } = world();
    const service = new ApiKeysService(deps);
    for (const createdBy of ['usr_2', 'usr_unknown']) {
      expect(await problemsOf(service.create('cmp_1', body(createdBy)))).toEqual([
        { path: 'created_by', message: 'is not a user of this company' },
      ]);
    }
    expect(keys.size).toBe(3);
  });

  it('create stores the hash of the key, never the key; the key is returned once', async () => {
    const { deps, keys } = world();
    const { doc, key } = await new ApiKeysService(deps).create('cmp_1', body('usr_1'));
    expect(isWellFormedApiKey(key)).toBe(true);
    const stored = keys.get(doc._id);
    expect(stored).toEqual({
      _id: doc._id,
      company_id: 'cmp_1',
      name: 'Zapier',
      prefix: displayPrefixOf(key),
      key_hash: hashApiKey(key),
      scopes: ['tasks:read'],
      expires_at: null,
      created_by: 'usr_1',
      created_at: expect.any(Date),
      last_used_at: null,
      revoked_at: null,
    });
    // Neither the key nor its secret part is anywhere in what was stored; the prefix is too short to use.
    expect(JSON.stringify(stored)).not.toContain(key);
    expect(JSON.stringify(stored)).not.toContain(key.slice(displayPrefixOf(key).length));
    expect(doc._id).toMatch(/^key_[0-9a-f]{24}$/);

    const second = await new ApiKeysService(deps).create('cmp_1', body('usr_1'));
    expect(second.key).not.toBe(key);
    expect(keys.get(second.doc._id)?.key_hash).not.toBe(stored?.key_hash);
  });

  it('revoke marks the key, disables its hooks and then tells the authenticator; again repeats both, the time kept', async () => {
    const { deps, keys, log } = world();
    const service = new ApiKeysService(deps);
    await service.revoke('cmp_1', 'key_a');
    expect(log).toEqual([
      'apiKeys.revoke cmp_1 key_a',
      'hooks.disableForRevokedKey cmp_1 key_a',
      'authenticator.keyChanged key_a',
    ]);
    const revokedAt = keys.get('key_a')?.revoked_at;
    expect(revokedAt).toBeInstanceOf(Date);
    expect(keys.get('key_b')?.revoked_at).toBeNull();

    await service.revoke('cmp_1', 'key_a');
    expect(log.slice(3)).toEqual([
      'apiKeys.revoke cmp_1 key_a',
      'hooks.disableForRevokedKey cmp_1 key_a',
      'authenticator.keyChanged key_a',
    ]);
    expect(keys.get('key_a')?.revoked_at).toBe(revokedAt);
  });

  it("revoke of an unknown key or another company's is a 404, and nobody is told anything", async () => {
    const { deps, keys, log } = world();
    const service = new ApiKeysService(deps);
    await expect(service.revoke('cmp_1', 'key_missing')).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.revoke('cmp_1', 'key_other')).rejects.toThrow('API key not found');
    expect(log).toEqual([]);
    expect(keys.get('key_other')?.revoked_at).toBeNull();
  });

  it("rename and list see only the company's keys", async () => {
    const { deps, keys } = world();
    const service = new ApiKeysService(deps);
    expect((await service.list('cmp_1')).map((key) => key._id)).toEqual(['key_a', 'key_b']);
    expect((await service.list('cmp_2')).map((key) => key._id)).toEqual(['key_other']);
    expect(await service.list('cmp_3')).toEqual([]);

    expect(await service.rename('cmp_1', 'key_b', 'Reports')).toMatchObject({ _id: 'key_b', name: 'Reports' });
    await expect(service.rename('cmp_1', 'key_other', 'Mine now')).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.rename('cmp_1', 'key_missing', 'Nothing')).rejects.toBeInstanceOf(NotFoundError);
    expect(keys.get('key_other')?.name).toBe('Other company');
  });
});
