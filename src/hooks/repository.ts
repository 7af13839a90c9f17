import { AnnouncedCache, type ChangeAnnouncer } from '../shared/announced-cache.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import type { EventType } from '../events/envelope.js';
import type { Collection, Db } from 'mongodb';

/** An event type, or `*` for every type. */
export type HookEvent = EventType | '*';

export interface HookDoc {
  _id: string;
  company_id: string;
  target_url: string;
  event: HookEvent;
  /** `whsec_...`; needed in clear to sign, returned to the subscriber only at creation. */
  secret: string;
  created_at: Date;
  /** Set when deliveries failed for 5 days; fan-out skips the hook until it is re-enabled. */
  disabled_at: Date | null;
  /** Start of the current run of failed attempts; null after any success. */
  failing_since: Date | null;
}

/**
 * The only code that touches `hooks`; every method is scoped by company. With a change feed, every
 * write is announced and the fan-out's lookup is cached per company (so an unsubscribe still stops
 * deliveries at once, in every process).
 */
export class HooksRepository {
  private readonly hooks: Collection<HookDoc>;
  private readonly enabledByCompany: AnnouncedCache<HookDoc[]>;

  constructor(
    db: Db,
    private readonly changes?: ChangeAnnouncer,
  ) {
    this.hooks = db.collection<HookDoc>('hooks');
    this.enabledByCompany = new AnnouncedCache(changes);
  }

  private async announce(companyId: string): Promise<void> {
    await this.changes?.announce(companyId);
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    return ensureCollectionIndexes(db, 'hooks', [
      // One subscription per (company, target, event): subscribing again re-enables it instead of doubling deliveries.
      { key: { company_id: 1, target_url: 1, event: 1 }, name: 'company_target_event', unique: true },
      { key: { company_id: 1, event: 1 }, name: 'company_event', migratable: true },
    ]);
  }

  /** Creates the subscription, or re-enables the existing one for the same target and event. */
  async subscribe(fresh: HookDoc): Promise<HookDoc> {
    const { company_id, target_url, event, disabled_at, failing_since, ...onInsert } = fresh;
    const upsert = () =>
      this.hooks.findOneAndUpdate(
        { company_id, target_url, event },
        { $setOnInsert: onInsert, $set: { disabled_at, failing_since } },
        { upsert: true, returnDocument: 'after' },
      );
    let hook: HookDoc;
    try {
      hook = (await upsert())!;
    } catch (error) {
      if (!isDuplicateKeyError(error)) throw error;
      hook = (await upsert())!; // a concurrent subscribe inserted first; now it matches
    }
    await this.announce(company_id);
    return hook;
  }

  /** In creation order (ids sort by creation time), a page at a time. */
  list(companyId: string, afterId?: string, limit = 1_000): Promise<HookDoc[]> {
    const filter = afterId ? { company_id: companyId, _id: { $gt: afterId } } : { company_id: companyId };
    return this.hooks.find(filter).sort({ _id: 1 }).limit(limit).toArray();
  }

  findById(companyId: string, hookId: string): Promise<HookDoc | null> {
    return this.hooks.findOne({ company_id: companyId, _id: hookId });
  }

  async delete(companyId: string, hookId: string): Promise<boolean> {
    const deleted = (await this.hooks.deleteOne({ company_id: companyId, _id: hookId })).deletedCount === 1;
    if (deleted) await this.announce(companyId);
    return deleted;
  }

  /** The hooks an event fans out to: enabled, subscribed to its type or to `*`. */
  async enabledFor(companyId: string, type: EventType): Promise<HookDoc[]> {
    const enabled = await this.enabledByCompany.get(companyId, () =>
      this.hooks.find({ company_id: companyId, disabled_at: null }).toArray(),
    );
    return enabled.filter((hook) => hook.event === type || hook.event === '*');
  }

  async reenable(companyId: string, hookId: string): Promise<HookDoc | null> {
    const hook = await this.hooks.findOneAndUpdate(
      { company_id: companyId, _id: hookId },
      { $set: { disabled_at: null, failing_since: null } },
      { returnDocument: 'after' },
    );
    await this.announce(companyId);
    return hook;
  }

  async recordSuccess(companyId: string, hookId: string): Promise<void> {
    const reset = await this.hooks.updateOne(
      { company_id: companyId, _id: hookId, failing_since: { $ne: null } },
      { $set: { failing_since: null } },
    );
    if (reset.modifiedCount > 0) await this.announce(companyId);
  }

  /** Notes a failed attempt; returns true when this failure disabled the hook (failing since `disableIfFailingSince` or earlier). */
  async recordFailure(companyId: string, hookId: string, now: Date, disableIfFailingSince: Date): Promise<boolean> {
    const started = await this.hooks.updateOne(
      { company_id: companyId, _id: hookId, failing_since: null },
      { $set: { failing_since: now } },
    );
    const disabled = await this.hooks.updateOne(
      { company_id: companyId, _id: hookId, disabled_at: null, failing_since: { $lte: disableIfFailingSince } },
      { $set: { disabled_at: now } },
    );
    if (started.modifiedCount > 0 || disabled.modifiedCount > 0) await this.announce(companyId);
    return disabled.modifiedCount === 1;
  }
}
