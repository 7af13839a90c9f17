// Unit-test support (not built: tsconfig.build.json leaves out *.test-support.ts).
import { ValidationError, type FieldProblem } from './errors.js';

/** The field problems a call was refused with: it must fail with a ValidationError. */
export async function problemsOf(call: Promise<unknown>): Promise<FieldProblem[]> {
  const error = await call.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof ValidationError)) throw new Error(`expected a ValidationError, got ${String(error)}`);
  return error.errors;
}
