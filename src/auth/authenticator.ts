import { LRUCache } from 'lru-cache';
import { SubscriptionInactiveError, UnauthorizedError } from '../shared/errors.js';
import { EXACT_TTL } from '../shared/lru.js';
import { KEY_PREFIX, hashApiKey, hashesEqual, isWellFormedApiKey } from './key-material.js';
import type { AuthContext } from '../contracts/auth-context.js';
import type { ChangeAnnouncer } from '../shared/change-feeds.js';
import type { ApiKeyDoc, ApiKeysRepository } from './api-keys.repository.js';

/** What authentication needs of a company: whether it exists and its subscription status (402). */
interface CompanyStatus {
  subscription_status: 'active' | 'inactive';
}

/** The companies feature's lookup, as far as authentication uses it. */
export interface CompanyLookup {
  findById(companyId: string): Promise<CompanyStatus | null>;
}

interface CachedKey {
  key: ApiKeyDoc;
  company: CompanyStatus | null;
  /** Built once per load and shared by the requests it admits (nothing modifies it). */
  context: AuthContext;
}

/**
 * Revocation, expiry and subscription changes must reach every web process within 5 s
 * (DECISIONS.md section 3), so no entry lives longer than this.
 */
export const AUTH_CACHE_TTL_MS = 4_000;

/** A value in our key format (`prk_…`) that matches no key: the failure that looks like guessing. */
export class UnknownApiKeyError extends UnauthorizedError {
  constructor() {
    super('The API key is invalid');
  }
}

export class ApiKeyAuthenticator {
  private readonly cache = new LRUCache<string, CachedKey>({ max: 10_000, ttl: AUTH_CACHE_TTL_MS, ...EXACT_TTL });

  /**
   * With a change feed, a revoked key or a changed company is forgotten by every process as soon as
   * the announcement arrives; the TTL stays as the bound should one be lost.
   */
  constructor(
    private readonly keys: ApiKeysRepository,
    private readonly companies: CompanyLookup,
    private readonly changes?: ChangeAnnouncer,
  ) {
    changes?.onChange((change) => {
      const [kind, id] = change?.split(':') ?? [];
      if (kind === 'key' && id) this.forgetKey(id);
      if (kind === 'company' && id) this.forgetCompany(id);
    });
  }

  /** After an admin change to a key: this process forgets it at once, the others when told. */
  async keyChanged(keyId: string): Promise<void> {
    if (this.changes) await this.changes.announce(`key:${keyId}`);
    else this.forgetKey(keyId);
  }

  /** After an admin change to a company (its subscription status decides 402). */
  async companyChanged(companyId: string): Promise<void> {
    if (this.changes) await this.changes.announce(`company:${companyId}`);
    else this.forgetCompany(companyId);
  }

  /** 401 for a missing, malformed, unknown, revoked or expired key; 402 for an inactive company. */
  async authenticate(presented: unknown, now = new Date()): Promise<AuthContext> {
    if (presented === undefined) throw new UnauthorizedError('The x-api-key header is missing');
    // Malformed keys are refused without a lookup: they cost nothing and can never match. One that
    // still claims our prefix is an attempt at a key, so it counts towards the failed-auth throttle.
    if (!isWellFormedApiKey(presented)) {
      throw typeof presented === 'string' && presented.startsWith(KEY_PREFIX)
        ? new UnknownApiKeyError()
        : new UnauthorizedError('The API key is invalid');
    }
    const hash = hashApiKey(presented);
    const found = this.cache.get(hash) ?? (await this.load(hash));
    if (!found) throw new UnknownApiKeyError();
    const { key, company, context } = found;
    if (key.revoked_at) throw new UnauthorizedError('The API key has been revoked');
    if (key.expires_at && key.expires_at.getTime() <= now.getTime())
      throw new UnauthorizedError('The API key has expired');
    if (!company) throw new UnauthorizedError('The API key is invalid');
    if (company.subscription_status !== 'active') throw new SubscriptionInactiveError();
    return context;
  }

  private forgetKey(keyId: string): void {
    for (const [hash, entry] of this.cache.entries()) if (entry.key._id === keyId) this.cache.delete(hash);
  }

  private forgetCompany(companyId: string): void {
    for (const [hash, entry] of this.cache.entries()) if (entry.key.company_id === companyId) this.cache.delete(hash);
  }

  private async load(hash: string): Promise<CachedKey | undefined> {
    const key = await this.keys.findByHash(hash);
    // Unknown keys are not cached: a key created a moment ago must work at once. The cache is keyed
    // by this same hash, so the constant-time comparison is needed here only.
    if (!key || !hashesEqual(key.key_hash, hash)) return undefined;
    const context = {
      companyId: key.company_id,
      keyId: key._id,
      userId: key.created_by,
      scopes: new Set(key.scopes),
      cause: { type: 'api_key' as const, id: key._id },
    };
    const entry = { key, company: await this.companies.findById(key.company_id), context };
    this.cache.set(hash, entry);
    return entry;
  }
}
