import { isDuplicateKeyError } from '../shared/mongo.js';
import { newWebhookSecret } from './signing.js';
import type { Collection, Db } from 'mongodb';

interface WebhookSecretDoc {
  /** The company id. */
  _id: string;
  secret: string;
  created_at: Date;
}

/**
 * Signing secrets of automation `webhook` actions: one `whsec_` secret per company, created on first
 * use (atomically, so concurrent workers agree). REST hooks have their own secret per hook.
 */
export class WebhookSecretsRepository {
  private readonly secrets: Collection<WebhookSecretDoc>;

  constructor(db: Db) {
    this.secrets = db.collection<WebhookSecretDoc>('webhook_secrets');
  }

  async forCompany(companyId: string): Promise<string> {
    const existing = await this.secrets.findOne({ _id: companyId });
    if (existing) return existing.secret;
    try {
      await this.secrets.insertOne({ _id: companyId, secret: newWebhookSecret(), created_at: new Date() });
    } catch (error) {
      if (!isDuplicateKeyError(error)) throw error; // another worker created it first; use theirs
    }
    return (await this.secrets.findOne({ _id: companyId }))!.secret;
  }
}
