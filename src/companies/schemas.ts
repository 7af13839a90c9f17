import { z } from 'zod';
import { isoTimestampOutput, toIso } from '../shared/time.js';
import type { CompanyDoc } from './repository.js';

export const subscriptionStatusSchema = z.enum(['active', 'inactive']);

export const companySchema = z
  .object({
    company_id: z.string(),
    name: z.string(),
    subscription_status: subscriptionStatusSchema,
    created_at: isoTimestampOutput,
  })
  .meta({ id: 'Company' });

export const createCompanyBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  subscription_status: subscriptionStatusSchema.default('active'),
});

export const updateCompanyBody = createCompanyBody.partial().extend({
  subscription_status: subscriptionStatusSchema.optional(),
});

export function toCompanyResponse(doc: CompanyDoc): z.infer<typeof companySchema> {
  return {
    company_id: doc._id,
    name: doc.name,
    subscription_status: doc.subscription_status,
    created_at: toIso(doc.created_at),
  };
}
