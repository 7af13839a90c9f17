import { MongoServerError, type Collection, type Db, type FindCursor } from 'mongodb';
import { AnnouncedCache, type ChangeAnnouncer } from '../shared/change-feeds.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import type { EventEnvelope, EventType } from '../events/envelope.js';

/** An event type, or `*` for every type. */
export type HookEvent = EventType | '*';

/** Which events of the subscribed types a hook gets (DECISIONS.md section 12.2). */
export interface HookFilter {
  /** Item events of this pipeline, and task events whose item is in it. */
  pipeline_id: string;
}

export interface HookDoc {
  _id: string;
  company_id: string;
  target_url: string;
  /** The first of `events`: the single type of section 9, still shown as `event`. */
  event: HookEvent;
  /** The subscribed types in the order given (1–10, or just `*`). Absent on hooks stored before 12.2 (see `eventsOf`). */
  events?: HookEvent[];
  /** `events` sorted and comma-joined: what makes (target, events) unique whatever the order given. */
  events_key?: string;
  filter?: HookFilter | null;
  /** `whsec_...`; needed in clear to sign, returned to the subscriber only at creation and rotation. */
  secret: string;
  /** The secret before the last rotation, which also signs until `previous_secret_expires_at`. */
  previous_secret?: string | null;
  previous_secret_expires_at?: Date | null;
  created_at: Date;
  /** Set when deliveries failed for 5 days; fan-out skips the hook until it is re-enabled. */
  disabled_at: Date | null;
  /** Start of the current run of failed attempts; null after any success. */
  failing_since: Date | null;
}

/** A hook's subscribed types, also for one stored with the single `event` of section 9. */
export function eventsOf(hook: Pick<HookDoc, 'event' | 'events'>): HookEvent[] {
  return hook.events ?? [hook.event];
}

/** The uniqueness key of a set of subscribed types: order and repeats do not matter. */
export function eventsKey(events: readonly HookEvent[]): string {
  return [...new Set(events)].sort().join(',');
}

/** The pipeline of an item of the company (archived ones included), or null: how task events meet a pipeline filter. */
export type ItemPipelineLookup = (companyId: string, itemId: string) => Promise<string | null>;

/** MongoDB's answer to listIndexes on a collection that does not exist yet. */
const NAMESPACE_NOT_FOUND = 26;
/** MongoDB's answer to dropIndex of an index that does not exist. */
const INDEX_NOT_FOUND = 27;

/** The index the fan-out's lookup of an event's hooks is served from. */
export const HOOK_EVENTS_INDEX = 'company_events';

/** Whether a created subscription was new or the same target and events existed already. */
export type SubscribeResult = { created: HookDoc } | { existing: HookDoc };

/**
 * The only code that touches `hooks`; every method is scoped by company. With a change feed, every
 * write is announced and the fan-out's lookups are cached per company and event type (so an
 * unsubscribe still stops deliveries at once, in every process).
 */
export class HooksRepository {
  private readonly hooks: Collection<HookDoc>;
  /** Per company: per event type, the enabled hooks subscribed to it (or to `*`). */
  private readonly matchingByCompany: AnnouncedCache<Map<EventType, Promise<HookDoc[]>>>;

  constructor(
    db: Db,
    private readonly changes?: ChangeAnnouncer,
    private readonly itemPipeline: ItemPipelineLookup = async () => null,
  ) {
    this.hooks = db.collection<HookDoc>('hooks');
    this.matchingByCompany = new AnnouncedCache(changes);
  }

  private async announce(companyId: string): Promise<void> {
    await this.changes?.announce(companyId);
  }

  static async ensureIndexes(db: Db): Promise<string[]> {
    const hooks = db.collection<HookDoc>('hooks');
    // Hooks stored with the single `event` of section 9 get `events` and `events_key` (once; a no-op after).
    for (const legacy of await hooks.find({ events: { $exists: false } }).toArray()) {
      await hooks.updateOne(
        { _id: legacy._id, events: { $exists: false } },
        { $set: { events: [legacy.event], events_key: eventsKey([legacy.event]) } },
      );
    }
    // Section 9's (company, target, event) indexes are retired: the unique one would refuse a second hook
    // whose first event type matches another's on the same target.
    const indexes = await hooks
      .listIndexes()
      .toArray()
      .catch((error: unknown) => {
        if (error instanceof MongoServerError && error.code === NAMESPACE_NOT_FOUND) return []; // no hooks yet
        throw error;
      });
    const existing = new Set(indexes.map((index) => String(index.name)));
    for (const retired of ['company_target_event', 'company_event']) {
      if (!existing.has(retired)) continue;
      await hooks.dropIndex(retired).catch((error: unknown) => {
        // Another process starting at the same time dropped it first.
        if (!(error instanceof MongoServerError && error.code === INDEX_NOT_FOUND)) throw error;
      });
    }
    return ensureCollectionIndexes(db, 'hooks', [
      // One subscription per (company, target, set of event types): a second one answers 409 hook_exists.
      { key: { company_id: 1, target_url: 1, events_key: 1 }, name: 'company_target_events', unique: true },
      // Fan-out: the hooks of one company subscribed to one type (or `*`), in creation order (multikey).
      { key: { company_id: 1, events: 1, _id: 1 }, name: HOOK_EVENTS_INDEX, migratable: true },
    ]);
  }

  /**
   * Creates the subscription; when the same target and event types exist already (the unique index
   * says so, also under concurrent subscribes), that hook is returned instead.
   */
  async subscribe(fresh: HookDoc): Promise<SubscribeResult> {
    const { company_id, target_url } = fresh;
    const events_key = eventsKey(eventsOf(fresh));
    try {
      await this.hooks.insertOne({ ...fresh, events: eventsOf(fresh), events_key });
    } catch (error) {
      if (!isDuplicateKeyError(error)) throw error;
      const existing = await this.hooks.findOne({ company_id, target_url, events_key });
      if (!existing) throw error; // deleted in between: the caller's retry creates it
      return { existing };
    }
    await this.announce(company_id);
    return { created: fresh };
  }

  /** The hook with this target and these event types (in any order), if there is one. */
  findSame(companyId: string, targetUrl: string, events: readonly HookEvent[]): Promise<HookDoc | null> {
    return this.hooks.findOne({ company_id: companyId, target_url: targetUrl, events_key: eventsKey(events) });
  }

  /** How many hooks the company has, enabled or not (HOOK_MAX_PER_COMPANY counts them all). */
  count(companyId: string): Promise<number> {
    return this.hooks.countDocuments({ company_id: companyId });
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

  /**
   * The hooks an event fans out to: enabled, subscribed to its type or to `*` (index `company_events`,
   * so only those are read), and whose filter, if any, it passes; in creation order.
   */
  async enabledFor(event: Pick<EventEnvelope, 'company_id' | 'type' | 'data'>): Promise<HookDoc[]> {
    const companyId = event.company_id;
    const byType = await this.matchingByCompany.get(companyId, async () => new Map());
    let matching = byType.get(event.type);
    if (!matching) {
      matching = this.matchingCursor(companyId, event.type).toArray();
      byType.set(event.type, matching);
      matching.catch(() => byType.delete(event.type));
    }
    const hooks = await matching;
    if (!hooks.some((hook) => hook.filter)) return hooks;
    const pipelineId = await this.pipelineOfEvent(event);
    return hooks.filter((hook) => !hook.filter || hook.filter.pipeline_id === pipelineId);
  }

  /** The enabled hooks of a company subscribed to `type` or `*`, in creation order: served by HOOK_EVENTS_INDEX. */
  matchingCursor(companyId: string, type: EventType): FindCursor<HookDoc> {
    return this.hooks.find({ company_id: companyId, events: { $in: [type, '*'] }, disabled_at: null }).sort({ _id: 1 });
  }

  /** The pipeline an event belongs to: an item's own, a task's item's (null for a task without an item). */
  private async pipelineOfEvent(event: Pick<EventEnvelope, 'company_id' | 'type' | 'data'>): Promise<string | null> {
    const { data } = event;
    // An item in API shape names its pipeline `pipeline`.
    if (event.type.startsWith('item.')) return typeof data.pipeline === 'string' ? data.pipeline : null;
    return typeof data.item_id === 'string' ? this.itemPipeline(event.company_id, data.item_id) : null;
  }

  /**
   * Makes `secret` the signing secret; the current one keeps signing until `previousExpiresAt`, and
   * one kept from an earlier rotation stops at once (at most two valid). Null when the hook is gone.
   */
  async rotateSecret(
    companyId: string,
    hookId: string,
    secret: string,
    previousExpiresAt: Date,
  ): Promise<HookDoc | null> {
    for (;;) {
      const current = await this.findById(companyId, hookId);
      if (!current) return null;
      // Conditional on the secret read, so two concurrent rotations cannot both keep the same previous one.
      const rotated = await this.hooks.findOneAndUpdate(
        { company_id: companyId, _id: hookId, secret: current.secret },
        { $set: { secret, previous_secret: current.secret, previous_secret_expires_at: previousExpiresAt } },
        { returnDocument: 'after' },
      );
      if (rotated) {
        await this.announce(companyId);
        return rotated;
      }
    }
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
