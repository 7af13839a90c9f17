/**
 * Fairness between receivers (DECISIONS.md section 12.2; issue 16 finding 5), within one worker
 * process. Two lanes: the fan-out (events delivered inline, where latency matters) and the
 * `deliveries` queue (its own worker and concurrency: retries, redeliveries, automation webhooks,
 * and every delivery to a hook that is slow or failing). A hook is slow once an attempt to it has
 * run longer than half of HOOK_TIMEOUT_MS (marked while that attempt still runs, so the next events
 * go to the other lane at once), until an attempt answers 2xx in time again or SLOW_FOR_MS passes;
 * failing while its `failing_since` is set. And each hook has at most `maxInFlight` deliveries in
 * flight across both lanes; until it has answered fast in this process, at most half of the
 * fan-out's slots delivering or waiting. Waiting for a permit ends after half the timeout, or at once
 * when the hook turns slow, so one receiver holds the others up at most that long, once.
 */

/** How long a slow mark lasts without a new slow attempt (a fast 2xx clears it at once). */
export const SLOW_FOR_MS = 10 * 60_000;

export interface LaneSettings {
  /** HOOK_MAX_IN_FLIGHT_PER_HOOK. */
  maxInFlight: number;
  /** HOOK_CONCURRENCY: each lane's slots; a hook gets at most half of them. */
  concurrency: number;
  /** HOOK_TIMEOUT_MS: an attempt running past half of it makes its hook slow. */
  timeoutMs: number;
  now?: () => number;
}

/** A delivery's right to be in flight at the receiver; `done` once the receiver answered or the request failed (delivered: a 2xx). */
export interface Permit {
  done(delivered: boolean): void;
}

interface HookState {
  inFlight: number;
  /** Fan-out slots this hook takes: delivering inline or waiting for a permit. */
  fanOutSlots: number;
  waiters: Array<(granted: boolean) => void>;
  slowUntil: number;
  /** Until when the hook counts as known fast (a 2xx in time), so a burst to it waits rather than hands off. */
  fastUntil: number;
}

export class HookLanes {
  private readonly hooks = new Map<string, HookState>();
  /** Deliveries in flight to one hook: HOOK_MAX_IN_FLIGHT_PER_HOOK, and never more than half a lane. */
  readonly perHookLimit: number;
  private readonly fanOutShare: number;
  readonly slowAfterMs: number;
  private readonly now: () => number;

  constructor(settings: LaneSettings) {
    const half = Math.max(1, Math.floor(settings.concurrency / 2));
    this.perHookLimit = Math.min(settings.maxInFlight, half);
    this.fanOutShare = half;
    this.slowAfterMs = Math.floor(settings.timeoutMs / 2);
    this.now = settings.now ?? Date.now;
  }

  /** Slow or failing hooks are served by the `deliveries` lane only. */
  isSlowOrFailing(hook: { _id: string; failing_since: Date | null }): boolean {
    if (hook.failing_since) return true;
    const state = this.hooks.get(hook._id);
    if (!state) return false;
    if (state.slowUntil > this.now()) return true;
    this.forgetIfIdle(hook._id, state); // expired marks go when next looked at
    return false;
  }

  /**
   * For the fan-out: a permit to deliver inline, waiting for one at most `slowAfterMs`; undefined
   * when the hook turned slow meanwhile or the wait ran out, and, for a hook not yet seen answering
   * fast in this process, when it has half of the fan-out's slots already: the delivery then goes to
   * the `deliveries` lane. A hook known fast may take more slots waiting: its permits free quickly,
   * and turning slow releases every waiter at once.
   */
  async enterFanOut(hookId: string): Promise<Permit | undefined> {
    const state = this.state(hookId);
    if (state.fastUntil <= this.now() && state.fanOutSlots >= this.fanOutShare) return undefined;
    state.fanOutSlots++;
    const granted = await this.acquire(state);
    if (!granted) {
      state.fanOutSlots--;
      this.forgetIfIdle(hookId, state);
      return undefined;
    }
    return this.permit(hookId, state, () => state.fanOutSlots--);
  }

  /**
   * For the `deliveries` lane: a permit, waiting for one (at most `slowAfterMs`) unless the hook is
   * slow; undefined when the hook has its limit in flight still (the job tries again later).
   */
  async enterLane(hookId: string): Promise<Permit | undefined> {
    const state = this.state(hookId);
    const granted = state.slowUntil > this.now() ? this.takeIfFree(state) : await this.acquire(state);
    if (!granted) {
      this.forgetIfIdle(hookId, state);
      return undefined;
    }
    return this.permit(hookId, state);
  }

  /** A permit now, if one is free (counted in flight). */
  tryAcquire(hookId: string): Permit | undefined {
    const state = this.state(hookId);
    if (!this.takeIfFree(state)) return undefined;
    return this.permit(hookId, state);
  }

  private takeIfFree(state: HookState): boolean {
    if (state.inFlight >= this.perHookLimit) return false;
    state.inFlight++;
    return true;
  }

  /** Takes a free permit or waits for one; a grant counts itself in flight. */
  private async acquire(state: HookState): Promise<boolean> {
    return this.takeIfFree(state) || this.waitForPermit(state);
  }

  /**
   * How long a lane job that found its hook at the limit waits before trying again: half the
   * timeout, doubling with each time it already waited (up to 4 times), jittered, so a long
   * backlog for one slow receiver costs few wake-ups.
   */
  retryLaterMs(deferrals: number, random: () => number = Math.random): number {
    return Math.round(Math.max(100, this.slowAfterMs) * 2 ** Math.min(deferrals, 2) * (1 + random()));
  }

  private permit(hookId: string, state: HookState, onDone?: () => void): Permit {
    const started = this.now();
    // Marked slow while the attempt still runs, so what follows takes the other lane at once.
    const watch = setTimeout(() => this.markSlow(state), this.slowAfterMs);
    watch.unref();
    let finished = false;
    return {
      done: (delivered) => {
        if (finished) return;
        finished = true;
        clearTimeout(watch);
        onDone?.();
        state.inFlight--;
        if (this.now() - started > this.slowAfterMs) this.markSlow(state);
        else if (delivered) {
          state.slowUntil = 0;
          state.fastUntil = this.now() + SLOW_FOR_MS;
        }
        this.grantNext(state);
        this.forgetIfIdle(hookId, state);
      },
    };
  }

  private waitForPermit(state: HookState): Promise<boolean> {
    if (state.slowUntil > this.now()) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = (granted: boolean) => {
        clearTimeout(timer);
        resolve(granted);
      };
      const timer = setTimeout(() => {
        state.waiters.splice(state.waiters.indexOf(waiter), 1);
        resolve(false);
      }, this.slowAfterMs);
      state.waiters.push(waiter);
    });
  }

  private grantNext(state: HookState): void {
    if (state.inFlight >= this.perHookLimit) return;
    const next = state.waiters.shift();
    if (!next) return;
    state.inFlight++; // taken here, synchronously, so no other caller slips in before the waiter resumes
    next(true);
  }

  private markSlow(state: HookState): void {
    state.slowUntil = this.now() + SLOW_FOR_MS;
    state.fastUntil = 0;
    // Whoever waits for this hook goes to the other lane rather than wait behind a slow receiver.
    for (const waiter of state.waiters.splice(0)) waiter(false);
  }

  private state(hookId: string): HookState {
    let state = this.hooks.get(hookId);
    if (!state) {
      state = { inFlight: 0, fanOutSlots: 0, waiters: [], slowUntil: 0, fastUntil: 0 };
      this.hooks.set(hookId, state);
    }
    return state;
  }

  /** Keeps the map to hooks with something going on or a mark that has not expired. */
  private forgetIfIdle(hookId: string, state: HookState): void {
    const now = this.now();
    if (
      state.inFlight === 0 &&
      state.fanOutSlots === 0 &&
      state.waiters.length === 0 &&
      state.slowUntil <= now &&
      state.fastUntil <= now
    )
      this.hooks.delete(hookId);
  }
}
