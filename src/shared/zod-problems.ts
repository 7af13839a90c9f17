import type { FieldProblem } from './errors.js';
import type { z } from 'zod';

/** zod issues as `errors[]` entries with dotted paths; an unknown key becomes one entry per key. */
export function problemsFromZodIssues(issues: z.core.$ZodIssue[], prefix: string[] = []): FieldProblem[] {
  return issues.flatMap((issue) => {
    const base = [...prefix, ...issue.path.map(String)];
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: [...base, key].join('.'), message: 'unknown field' }));
    }
    return [{ path: base.join('.'), message: issue.message }];
  });
}
