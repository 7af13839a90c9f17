import { NotFoundError } from '../shared/errors.js';
import type { CompaniesRepository, CompanyDoc } from './repository.js';
import type { createCompanyBody, updateCompanyBody } from './schemas.js';
import type { z } from 'zod';

export interface CompaniesServiceDeps {
  companies: Pick<CompaniesRepository, 'create' | 'findById' | 'update'>;
  /** The auth feature's cached authentication: a company's subscription decides 402, so a change reaches it at once. */
  authentication: { companyChanged(companyId: string): Promise<void> };
}

/** Companies as the admin API manages them (the tenants themselves). */
export class CompaniesService {
  constructor(private readonly deps: CompaniesServiceDeps) {}

  create(body: z.infer<typeof createCompanyBody>): Promise<CompanyDoc> {
    return this.deps.companies.create(body);
  }

  async get(companyId: string): Promise<CompanyDoc> {
    const company = await this.deps.companies.findById(companyId);
    if (!company) throw new NotFoundError('Company');
    return company;
  }

  async update(companyId: string, body: z.infer<typeof updateCompanyBody>): Promise<CompanyDoc> {
    const company = await this.deps.companies.update(companyId, body);
    if (!company) throw new NotFoundError('Company');
    await this.deps.authentication.companyChanged(company._id);
    return company;
  }
}
