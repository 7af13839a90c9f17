import { z } from 'zod';
import type { UserDoc } from './repository.js';

export const userSchema = z.object({ user_id: z.string(), name: z.string(), email: z.string() }).meta({ id: 'User' });

export const createUserBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  email: z.email().max(320),
});

export function toUserResponse(doc: UserDoc): z.infer<typeof userSchema> {
  return { user_id: doc._id, name: doc.name, email: doc.email };
}
