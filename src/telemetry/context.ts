import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { withoutUnsampledSpan } from './unsampled.js';
import type { Context } from '@opentelemetry/api';

/**
 * The SDK's context manager (AsyncLocalStorage), entered only while there is a trace to follow.
 *
 * On Node 20 an AsyncLocalStorage, once entered, keeps async hooks on for every promise of the process
 * (CPU on every request, whether or not anything is traced). Most requests are not
 * sampled and enter no context at all (src/telemetry/requests.ts), so the storage is switched off again
 * whenever no entered scope is still running: a request with a trace to follow holds it from its start
 * to its response, a `with` whose function returns a promise (a job, a publish) until that settles.
 * (A synchronous `with` needs nothing more: it runs within one of those, or leaves nothing behind.)
 * Work that starts later enters its own context again. What it makes active never holds an unsampled
 * span (see unsampled.ts).
 */
export class OnDemandContextManager extends AsyncLocalStorageContextManager {
  /** Entered scopes not finished: async ones (a job, a publish) and held ones (a request, see hold). */
  private open = 0;

  override with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const entered = withoutUnsampledSpan(context);
    // Nothing to enter (typically the root context while the storage is off): no need to switch it on.
    if (entered === this.active()) return fn.apply(thisArg as ThisParameterType<F>, args);
    const release = this.hold();
    let result: ReturnType<F>;
    try {
      result = super.with(entered, fn, thisArg, ...args);
    } catch (error) {
      release();
      throw error;
    }
    // An async scope (a job, a publish) stays open until it settles; its continuations need the context.
    if (result instanceof Promise) result.then(release, release);
    else release();
    return result;
  }

  override attach(context: Context): ReturnType<AsyncLocalStorageContextManager['attach']> {
    return super.attach(withoutUnsampledSpan(context));
  }

  /** Keeps the storage on until the returned function is called (once), e.g. for a request's lifetime. */
  hold(): () => void {
    this.open++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.open === 0) this.disable();
    };
  }
}
