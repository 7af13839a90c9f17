/**
 * The value, for places where the code itself guarantees it exists (an index just checked against a
 * length, a regex group that always matches). Throws with `what` if that guarantee is ever broken,
 * instead of carrying `undefined` further.
 */
export function must<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`expected ${what}`);
  return value;
}
