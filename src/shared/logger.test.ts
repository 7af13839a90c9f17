import fs from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger, LOG_FLUSH_INTERVAL_MS } from './logger.js';

const settle = (intervals: number) => new Promise((resolve) => setTimeout(resolve, LOG_FLUSH_INTERVAL_MS * intervals));

afterEach(() => vi.restoreAllMocks());

describe('the buffered standard output', () => {
  it('writes nothing while nothing is logged, and a logged line within a flush interval or two', async () => {
    const writes = vi.spyOn(fs, 'write');
    const logger = createLogger('info', 'logger-test');
    await settle(3.5);
    expect(writes).not.toHaveBeenCalled();

    logger.info({ probe: 'logger.test' }, 'buffered line');
    await settle(2.5);
    const written = writes.mock.calls.map((call) => String(call[1]));
    expect(written.filter((chunk) => chunk.includes('"probe":"logger.test"'))).toHaveLength(1);
    expect(written.filter((chunk) => chunk === '')).toEqual([]);
  });
});
