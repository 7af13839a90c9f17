import { LRUCache } from 'lru-cache';
import { EXACT_TTL } from './lru.js';
import type { Logger } from './logger.js';
import type { RedisClient } from './redis.js';

/**
 * Bounds staleness should an announcement be lost (its publish failed while the listeners stayed
 * connected): like an API key's, a change is then seen everywhere within this long.
 */
const CACHE_TTL_MS = 5_000;
/** Entries per cache, so ids made up by a caller cannot grow it without bound. */
const CACHE_MAX_ENTRIES = 10_000;

/**
 * Change announcements between processes over Redis pub/sub, one channel per kind of record. A
 * write announces the key it changed; this process forgets it at once, the others when the message
 * arrives. While the subscription is not live (not yet subscribed, or the connection was lost), caches
 * read through, and when it is back they start empty: nothing announced meanwhile is missed.
 */
export class ChangeAnnouncer {
  private readonly listeners = new Set<(key?: string) => void>();
  private subscribed = false;

  constructor(
    private readonly publisher: RedisClient,
    readonly channel: string,
    private readonly logger: Logger,
  ) {}

  get live(): boolean {
    return this.subscribed;
  }

  /** Never throws: a failed publish is covered by the caches' TTL. */
  async announce(key: string): Promise<void> {
    this.notify(key);
    await this.publisher.publish(this.channel, key).catch((error: unknown) => {
      this.logger.warn(
        { err: error, channel: this.channel },
        'change not announced; other processes see it within 5 s',
      );
    });
  }

  onChange(listener: (key?: string) => void): void {
    this.listeners.add(listener);
  }

  /** Listens on `subscriber`, a connection in subscriber mode from now on (it may carry several channels). */
  async listen(subscriber: RedisClient): Promise<void> {
    subscriber.on('message', (channel: string, key: string) => {
      if (channel === this.channel) this.notify(key);
    });
    subscriber.on('close', () => {
      this.subscribed = false;
      this.notify();
    });
    const subscribe = () =>
      subscriber.subscribe(this.channel).then(
        () => {
          this.notify(); // whatever was cached while not listening may predate a change
          this.subscribed = true;
        },
        () => {}, // not reachable now: caches read through until 'ready' brings another try
      );
    subscriber.on('ready', () => void subscribe());
    await subscribe();
  }

  private notify(key?: string): void {
    for (const listener of this.listeners) listener(key);
  }
}

/**
 * Records read often and changed rarely, cached per process and dropped on every announced change.
 * Entries hold the read's promise, so concurrent misses share one read and a read still running when
 * a change is announced is dropped with its entry. Callers must not modify what they get.
 */
export class AnnouncedCache<T extends object | null> {
  private readonly entries = new LRUCache<string, { value: Promise<T> }>({
    max: CACHE_MAX_ENTRIES,
    ttl: CACHE_TTL_MS,
    ...EXACT_TTL,
  });

  /** Without an announcer (a process with no change feed) nothing is cached: every get loads. */
  constructor(private readonly announcer?: ChangeAnnouncer) {
    announcer?.onChange((key) => (key === undefined ? this.entries.clear() : this.entries.delete(key)));
  }

  get(key: string, load: () => Promise<T>): Promise<T> {
    if (!this.announcer?.live) return load();
    const cached = this.entries.get(key);
    if (cached) return cached.value;
    const entry = { value: load() };
    this.entries.set(key, entry);
    entry.value.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    return entry.value;
  }
}

/** The channel on which the event sequencer announces each company whose readable feed position moved. */
export function feedChannel(queuePrefix: string): string {
  return `${queuePrefix}:changes:events`;
}

/** The change channels of one deployment (its queue prefix) and the one subscriber connection they share. */
export function createChangeFeeds(redis: RedisClient, queuePrefix: string, logger: Logger) {
  const subscriber = redis.duplicate();
  subscriber.on('error', () => {}); // while it is down the caches read through
  const feeds = {
    hooks: new ChangeAnnouncer(redis, `${queuePrefix}:changes:hooks`, logger),
    pipelines: new ChangeAnnouncer(redis, `${queuePrefix}:changes:pipelines`, logger),
    /** API keys revoked and companies changed: the web processes' authentication caches. */
    access: new ChangeAnnouncer(redis, `${queuePrefix}:changes:access`, logger),
    /** Companies with new readable events (keys are company ids): wakes the feed's waiting readers. */
    events: new ChangeAnnouncer(redis, feedChannel(queuePrefix), logger),
  };
  for (const feed of Object.values(feeds)) void feed.listen(subscriber);
  return { ...feeds, close: () => subscriber.disconnect() };
}

export type ChangeFeeds = Omit<ReturnType<typeof createChangeFeeds>, 'close'>;
