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

  it('still writes a line logged while a write is under way, once that write is done', async () => {
    const realWrite = fs.write;
    const delayed = vi.spyOn(fs, 'write').mockImplementation((...args: unknown[]) => {
      const callback = args.at(-1) as (...result: unknown[]) => void;
      // The write takes longer than a flush interval: the timer ticks while it is under way.
      const slowed = (...result: unknown[]) => setTimeout(() => callback(...result), LOG_FLUSH_INTERVAL_MS * 2.5);
      return (realWrite as (...all: unknown[]) => void)(...args.slice(0, -1), slowed);
    });
    const logger = createLogger('info', 'logger-test');
    logger.info({ probe: 'first' }, 'buffered line');
    await settle(1.5); // its write has started and is not done
    logger.info({ probe: 'second' }, 'buffered line');
    await settle(6);
    const written = delayed.mock.calls.map((call) => String(call[1])).join('');
    expect(written).toContain('"probe":"first"');
    expect(written).toContain('"probe":"second"');
  });
});
