import { NotFoundError } from '../shared/errors.js';

/** Loads the company named in an admin path, 404 when it does not exist. */
export async function requireCompany(
  app: { repos: { companies: { findById(id: string): Promise<unknown> } } },
  companyId: string,
) {
  const company = await app.repos.companies.findById(companyId);
  if (!company) throw new NotFoundError('Company');
  return company;
}
