import type { UserDoc, UsersRepository } from './repository.js';
import type { createUserBody } from './schemas.js';
import type { z } from 'zod';

export interface UsersServiceDeps {
  users: Pick<UsersRepository, 'create' | 'list'>;
}

/** Users of a company, as the admin API manages them (the route has checked the company exists). */
export class UsersService {
  constructor(private readonly deps: UsersServiceDeps) {}

  create(companyId: string, body: z.infer<typeof createUserBody>): Promise<UserDoc> {
    return this.deps.users.create(companyId, body);
  }

  list(companyId: string): Promise<UserDoc[]> {
    return this.deps.users.list(companyId);
  }
}
