import { createContextKey, ROOT_CONTEXT } from '@opentelemetry/api';
import { describe, expect, it, vi } from 'vitest';
import { OnDemandContextManager } from './context.js';
import type { AsyncLocalStorage } from 'node:async_hooks';

const KEY = createContextKey('test value');

/** The manager with spies on its AsyncLocalStorage: whether it was entered, and switched off. */
function manager() {
  const contextManager = new OnDemandContextManager().enable();
  const storage = (contextManager as unknown as { _asyncLocalStorage: AsyncLocalStorage<unknown> })._asyncLocalStorage;
  return { contextManager, run: vi.spyOn(storage, 'run'), disable: vi.spyOn(storage, 'disable') };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('the on-demand context manager', () => {
  it('does not enter the storage for the context already active (the root one, when nothing is traced)', () => {
    const { contextManager, run } = manager();
    expect(contextManager.with(ROOT_CONTEXT, () => 42)).toBe(42);
    expect(run).not.toHaveBeenCalled();
  });

  it('keeps an entered context across awaits, and switches the storage off once its scope has settled', async () => {
    const { contextManager, disable } = manager();
    const seen = await contextManager.with(ROOT_CONTEXT.setValue(KEY, 'a'), async () => {
      await tick();
      return contextManager.active().getValue(KEY);
    });
    expect(seen).toBe('a');
    await tick();
    expect(disable).toHaveBeenCalledTimes(1);
    expect(contextManager.active()).toBe(ROOT_CONTEXT);
  });

  it('keeps it on while held (a request with a trace to follow), after a synchronous scope, once per hold', () => {
    const { contextManager, disable } = manager();
    const release = contextManager.hold();
    contextManager.with(ROOT_CONTEXT.setValue(KEY, 'b'), () => undefined);
    expect(disable).not.toHaveBeenCalled();
    release();
    release();
    expect(disable).toHaveBeenCalledTimes(1);
  });
});
