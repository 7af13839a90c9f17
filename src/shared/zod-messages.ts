import { z } from 'zod';

/**
 * zod's messages where a client reads them (`errors[].message`, the problem's `detail`): a field that
 * is missing is named as required ("title: required field (expected string)") instead of zod's
 * "Invalid input: expected string, received undefined". Set once, process-wide, when the app module
 * loads; a schema's own message still wins.
 */
z.config({
  customError: (issue) =>
    issue.code === 'invalid_type' && issue.input === undefined
      ? `required field (expected ${issue.expected})`
      : undefined,
});
