import type { Redis } from 'ioredis';
import type { EventType } from '../events/envelope.js';
import type { Logger } from '../shared/logger.js';
import type { AnnounceHookChange, HookDoc, HooksRepository } from './repository.js';

/**
 * Staleness bound should an announcement be lost (its publish failed): like an API key's, a change
 * is then seen within this long.
 */
const CACHE_TTL_MS = 5_000;

export function hookChangesChannel(queuePrefix: string): string {
  return `${queuePrefix}:hook-changes`;
}

/** Announces on Redis pub/sub; a failed publish is left to the caches' TTL. */
export function announceOnRedis(redis: Redis, queuePrefix: string, logger: Logger): AnnounceHookChange {
  const channel = hookChangesChannel(queuePrefix);
  return async (companyId) => {
    await redis.publish(channel, companyId).catch((error: unknown) => {
      logger.warn({ err: error, company_id: companyId }, 'hook change not announced; worker caches catch up within 5 s');
    });
  };
}

/**
 * The hooks worker's view of each company's enabled hooks, so fan-out does not read MongoDB for every
 * event. Every write to a company's hooks is announced on a Redis channel (HooksRepository) and drops
 * that company's entry, so an unsubscribe stops deliveries at once. Reads go to MongoDB whenever the
 * subscription is not live (before it starts, and from a lost connection until it is back).
 */
export class HookCache {
  /** Promises, so a read still running when a change is announced is dropped with the entry. */
  private readonly entries = new Map<string, { hooks: Promise<HookDoc[]>; expiresAt: number }>();
  private live = false;

  constructor(private readonly hooks: Pick<HooksRepository, 'enabledOf'>) {}

  /** Subscribes `subscriber` (a connection of its own: it is in subscriber mode from now on). */
  async listen(subscriber: Redis, queuePrefix: string): Promise<void> {
    const channel = hookChangesChannel(queuePrefix);
    subscriber.on('message', (from: string, companyId: string) => {
      if (from === channel) this.forget(companyId);
    });
    // Announcements made while disconnected are lost: forget everything, read through until resubscribed.
    subscriber.on('close', () => {
      this.live = false;
      this.forget();
    });
    subscriber.on('ready', () => {
      this.forget();
      this.live = true; // ioredis resubscribes before it reports ready
    });
    await subscriber.subscribe(channel);
    this.live = true;
  }

  private forget(companyId?: string): void {
    if (companyId === undefined) this.entries.clear();
    else this.entries.delete(companyId);
  }

  /** The hooks an event fans out to: enabled, subscribed to its type or to `*`. */
  async enabledFor(companyId: string, type: EventType): Promise<HookDoc[]> {
    const hooks = await this.enabledOf(companyId);
    return hooks.filter((hook) => hook.event === type || hook.event === '*');
  }

  private enabledOf(companyId: string): Promise<HookDoc[]> {
    if (!this.live) return this.hooks.enabledOf(companyId);
    const now = Date.now();
    const cached = this.entries.get(companyId);
    if (cached && cached.expiresAt > now) return cached.hooks;
    // Concurrent fan-outs for one company share the read.
    const entry = { hooks: this.hooks.enabledOf(companyId), expiresAt: now + CACHE_TTL_MS };
    this.entries.set(companyId, entry);
    entry.hooks.catch(() => {
      if (this.entries.get(companyId) === entry) this.entries.delete(companyId);
    });
    return entry.hooks;
  }
}
