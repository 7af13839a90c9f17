export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls until `check` returns a truthy value and returns it; throws when the time is up, so a test
 * that forgets to assert the result still fails when the awaited thing never happens.
 */
export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await check();
  while (!value) {
    if (Date.now() >= deadline) {
      throw new Error(
        `waitFor: still false after ${timeoutMs} ms: ${check.toString().replace(/\s+/g, ' ').slice(0, 160)}`,
      );
    }
    await sleep(intervalMs);
    value = await check();
  }
  return value;
}
