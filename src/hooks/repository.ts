import { MongoServerError, type Collection, type Db, type FindCursor } from 'mongodb';
import { resourceOf } from '../contracts/envelope.js';
import { AnnouncedCache, type ChangeAnnouncer } from '../shared/change-feeds.js';
import { ensureCollectionIndexes } from '../shared/indexes.js';
import { isDuplicateKeyError } from '../shared/mongo.js';
import {
  moveOutboxes,
  OUTBOX_INDEX,
  outboxOnUpdate,
  type OutboxFields,
  type OutboxOverflow,
} from '../shared/outbox.js';
import { passesChangeFilter, type ChangeCondition } from './change-filter.js';
import type { EventEnvelope, EventType } from '../contracts/envelope.js';

/** An event type, or `*` for every type. */
export type HookEvent = EventType | '*';

/** Which events of the subscribed types a hook gets (DECISIONS.md section 12.2). */
export interface HookFilter {
  /** Item events of this pipeline, and task events whose item is in it. */
  pipeline_id?: string;
  /** Leave out events these API keys of the company caused (a two-way sync's own echo, section 13.1). */
  exclude_actors?: string[];
  /** Only `*.updated` events whose `changes` have one of these fields (and values): change-filter.ts. */
  changes?: ChangeCondition[];
}

export interface HookDoc extends OutboxFields {
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
  /**
   * The API key that subscribed the hook (DECISIONS.md section 13.4): revoking it disables the hook. Null on
   * hooks stored before keys were recorded (never disabled for it); absent only until the start-up migration.
   */
  created_by_key_id?: string | null;
  /** That key's `expires_at`, copied (a key's expiry never changes): from then on the hook is disabled. */
  created_by_key_expires_at?: Date | null;
  /**
   * Per company, the hooks hold distinct slot numbers below HOOK_MAX_PER_COMPANY (unique index `company_slot`):
   * the cap holds however many subscribes race. Hooks stored before slots get theirs at start.
   */
  slot?: number;
  /** Set when deliveries failed for 5 days or the creating key was revoked; fan-out skips the hook meanwhile. */
  disabled_at: Date | null;
  /** Why the hook is disabled; absent on hooks disabled before reasons were recorded (`failing`). */
  disabled_reason?: HookDisabledReason | null;
  /** Start of the current run of failed attempts; null after any success. */
  failing_since: Date | null;
}

/**
 * Why a hook is disabled: its deliveries failed for 5 days, the key that created it was revoked or expired,
 * or its subscriber disabled it (PATCH `enabled: false`).
 */
export const HOOK_DISABLED_REASONS = ['failing', 'key_revoked', 'manual'] as const;
export type HookDisabledReason = (typeof HOOK_DISABLED_REASONS)[number];

/**
 * Whether and why a hook is disabled at `now`. A hook whose creating key has expired is disabled from the
 * key's `expires_at` on, judged here rather than written at that moment (nothing runs at a key's expiry).
 */
export function disabledState(
  hook: Pick<HookDoc, 'disabled_at' | 'disabled_reason' | 'created_by_key_expires_at'>,
  now: Date,
): { reason: HookDisabledReason; at: Date } | null {
  if (hook.disabled_at) return { reason: hook.disabled_reason ?? 'failing', at: hook.disabled_at };
  const expiresAt = hook.created_by_key_expires_at;
  if (expiresAt && expiresAt.getTime() <= now.getTime()) return { reason: 'key_revoked', at: expiresAt };
  return null;
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

/** The index that gives each of a company's hooks its own slot number. */
const HOOK_SLOT_INDEX = 'company_slot';
/** Attempts at a free slot before giving up; each lost one means another subscribe took a slot meanwhile. */
const SLOT_ATTEMPTS = 100;

/**
 * Whether a subscribe created the hook, found the same target and events there already, or found every slot
 * below the cap taken.
 */
export type SubscribeResult = { created: HookDoc } | { existing: HookDoc } | { full: true };

/** A duplicate key on `company_slot`: another hook took the slot first. */
function isSlotTaken(error: MongoServerError): boolean {
  const pattern = (error as { keyPattern?: Record<string, unknown> }).keyPattern;
  return pattern ? 'slot' in pattern : error.message.includes(`index: ${HOOK_SLOT_INDEX}`);
}

/** The lowest slot number not in `used`. */
function lowestFree(used: ReadonlySet<number>): number {
  let slot = 0;
  while (used.has(slot)) slot++;
  return slot;
}

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
    /** Where the hook.disabled events in a hook's outbox are moved to at once (the relay moves what is left). */
    private readonly eventStore?: OutboxOverflow,
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
    const rebuilt = await ensureCollectionIndexes(db, 'hooks', [
      // One subscription per (company, target, set of event types): a second one answers 409 hook_exists.
      { key: { company_id: 1, target_url: 1, events_key: 1 }, name: 'company_target_events', unique: true },
      // Fan-out: the hooks of one company subscribed to one type (or `*`), in creation order (multikey).
      { key: { company_id: 1, events: 1, _id: 1 }, name: HOOK_EVENTS_INDEX, migratable: true },
      // HOOK_MAX_PER_COMPANY, exact under concurrency: no two hooks of a company hold the same slot.
      {
        key: { company_id: 1, slot: 1 },
        name: HOOK_SLOT_INDEX,
        unique: true,
        partialFilterExpression: { slot: { $type: 'number' } },
      },
      // hook.disabled events wait in the hook's own outbox until they are in `events` (the relay's scan).
      { ...OUTBOX_INDEX, migratable: true },
    ]);
    await HooksRepository.migrateCreators(hooks);
    await HooksRepository.migrateSlots(hooks);
    return rebuilt;
  }

  /**
   * Hooks stored before their creating key was recorded (section 13.4): kept and listed with the key unknown
   * (null), so no revocation ever disables them; a hook disabled then was disabled for failing.
   */
  private static async migrateCreators(hooks: Collection<HookDoc>): Promise<void> {
    await hooks.updateMany(
      { created_by_key_id: { $exists: false } },
      { $set: { created_by_key_id: null, created_by_key_expires_at: null } },
    );
    await hooks.updateMany(
      { disabled_reason: { $exists: false }, disabled_at: { $ne: null } },
      { $set: { disabled_reason: 'failing' } },
    );
    await hooks.updateMany({ disabled_reason: { $exists: false } }, { $set: { disabled_reason: null } });
  }

  /**
   * Hooks stored before slots get the lowest free slot of their company (which may be at or above the cap for
   * a company that had more hooks than it; they stay). Safe with several processes starting at once: a slot
   * is only set on a hook that has none, and the unique index refuses a slot taken meanwhile.
   */
  private static async migrateSlots(hooks: Collection<HookDoc>): Promise<void> {
    const pending = await hooks
      .find({ slot: { $exists: false } }, { projection: { company_id: 1 } })
      .sort({ _id: 1 })
      .toArray();
    for (const { _id, company_id } of pending) {
      for (;;) {
        const used = await HooksRepository.usedSlots(hooks, company_id);
        try {
          await hooks.updateOne(
            { _id, company_id, slot: { $exists: false } },
            { $set: { slot: lowestFree(used.slots) } },
          );
          break;
        } catch (error) {
          if (!(isDuplicateKeyError(error) && isSlotTaken(error))) throw error;
        }
      }
    }
  }

  /** The slots a company's hooks hold, and how many hooks it has (those without a slot yet included). */
  private static async usedSlots(
    hooks: Collection<HookDoc>,
    companyId: string,
  ): Promise<{ slots: Set<number>; count: number }> {
    const held = await hooks.find({ company_id: companyId }, { projection: { slot: 1 } }).toArray();
    return {
      slots: new Set(held.flatMap((hook) => (typeof hook.slot === 'number' ? [hook.slot] : []))),
      count: held.length,
    };
  }

  /**
   * Creates the subscription in a free slot below `maxHooks`; when the same target and event types exist
   * already (the unique index says so, also under concurrent subscribes), that hook is returned instead.
   *
   * The cap is exact whatever runs at the same time: the insert itself claims a slot (unique per company), so
   * of racing subscribes each gets a distinct slot or tries another one, and a subscribe is refused only
   * when it read the company's hooks and found them at the cap.
   */
  async subscribe(fresh: Omit<HookDoc, 'slot'>, maxHooks: number): Promise<SubscribeResult> {
    const { company_id, target_url } = fresh;
    const events = eventsOf(fresh);
    const events_key = eventsKey(events);
    for (let attempt = 0; attempt < SLOT_ATTEMPTS; attempt++) {
      const used = await HooksRepository.usedSlots(this.hooks, company_id);
      const free = used.count >= maxHooks ? [] : [...Array(maxHooks).keys()].filter((slot) => !used.slots.has(slot));
      if (free.length === 0) {
        const existing = await this.hooks.findOne({ company_id, target_url, events_key });
        return existing ? { existing } : { full: true };
      }
      // A random free slot: racing subscribes then rarely pick the same one.
      const slot = free[Math.floor(Math.random() * free.length)]!;
      const hook: HookDoc = { ...fresh, events, events_key, slot };
      try {
        await this.hooks.insertOne(hook);
      } catch (error) {
        if (!isDuplicateKeyError(error)) throw error;
        if (isSlotTaken(error)) continue;
        const existing = await this.hooks.findOne({ company_id, target_url, events_key });
        if (!existing) continue; // deleted in between: try again
        return { existing };
      }
      await this.announce(company_id);
      return { created: hook };
    }
    throw new Error(`no free hook slot after ${SLOT_ATTEMPTS} attempts`);
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
  async enabledFor(
    event: Pick<EventEnvelope, 'company_id' | 'type' | 'data' | 'actor' | 'changes'>,
  ): Promise<HookDoc[]> {
    const companyId = event.company_id;
    const byType = await this.matchingByCompany.get(companyId, async () => new Map());
    let matching = byType.get(event.type);
    if (!matching) {
      matching = this.matchingCursor(companyId, event.type).toArray();
      byType.set(event.type, matching);
      matching.catch(() => byType.delete(event.type));
    }
    // A hook whose creating key has expired is disabled from that moment on (its stored state cannot say so).
    const now = new Date();
    const causedBy = event.actor?.type === 'api_key' ? event.actor.id : undefined;
    // filter.changes is judged from the event's own `changes`: no read (DECISIONS.md section 13.2).
    const hooks = (await matching).filter(
      (hook) =>
        !disabledState(hook, now) &&
        !(causedBy && hook.filter?.exclude_actors?.includes(causedBy)) &&
        passesChangeFilter(hook.filter?.changes, event),
    );
    // A pipeline filter judges task and item events; a hook event (hook.disabled) belongs to no pipeline.
    if (resourceOf(event.type) === 'hook' || !hooks.some((hook) => hook.filter?.pipeline_id)) return hooks;
    const pipelineId = await this.pipelineOfEvent(event);
    return hooks.filter((hook) => !hook.filter?.pipeline_id || hook.filter.pipeline_id === pipelineId);
  }

  /**
   * Whether the hook's types and filter take the event, as the fan-out judges it (enabledFor), for one hook
   * and one event: what a recovery sends again (recovery.ts). Whether the hook is enabled is not judged here.
   */
  async takes(hook: HookDoc, event: EventEnvelope): Promise<boolean> {
    const types = eventsOf(hook);
    if (!types.includes('*') && !types.includes(event.type)) return false;
    const causedBy = event.actor?.type === 'api_key' ? event.actor.id : undefined;
    if (causedBy && hook.filter?.exclude_actors?.includes(causedBy)) return false;
    if (!passesChangeFilter(hook.filter?.changes, event)) return false;
    if (!hook.filter?.pipeline_id || resourceOf(event.type) === 'hook') return true;
    return (await this.pipelineOfEvent(event)) === hook.filter.pipeline_id;
  }

  /** The enabled hooks of a company subscribed to `type` or `*`, in creation order: served by HOOK_EVENTS_INDEX. */
  matchingCursor(companyId: string, type: EventType): FindCursor<HookDoc> {
    return this.hooks.find({ company_id: companyId, events: { $in: [type, '*'] }, disabled_at: null }).sort({ _id: 1 });
  }

  /** The pipeline an event belongs to: an item's own, a task's item's (null for a task without an item). */
  private async pipelineOfEvent(event: Pick<EventEnvelope, 'company_id' | 'type' | 'data'>): Promise<string | null> {
    const { data } = event;
    // An item in API shape names its pipeline `pipeline`.
    if (resourceOf(event.type) === 'item') return typeof data.pipeline === 'string' ? data.pipeline : null;
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

  /**
   * Changes a hook (PATCH): its target, types and filter as given; `enabled` false disables it (manual),
   * true re-enables it with its failure state cleared. A hook disabled because its key was revoked stays
   * disabled. Returns the hook after the change, `{ existing }` when another hook of the company already
   * has that target and those types, or null when there is no such hook.
   */
  async update(
    companyId: string,
    hookId: string,
    change: { target_url?: string; events?: HookEvent[]; filter?: HookFilter | null; enabled?: boolean },
    now = new Date(),
  ): Promise<HookDoc | { existing: HookDoc } | null> {
    const set: Partial<HookDoc> = {};
    if (change.target_url !== undefined) set.target_url = change.target_url;
    if (change.events !== undefined)
      Object.assign(set, { event: change.events[0], events: change.events, events_key: eventsKey(change.events) });
    if (change.filter !== undefined) set.filter = change.filter;
    if (change.enabled === true) Object.assign(set, { disabled_at: null, disabled_reason: null, failing_since: null });
    const filter = { company_id: companyId, _id: hookId };
    try {
      if (Object.keys(set).length > 0) {
        const guard = change.enabled === true ? { disabled_reason: { $ne: 'key_revoked' as const } } : {};
        const updated = await this.hooks.updateOne({ ...filter, ...guard }, { $set: set });
        if (updated.matchedCount === 0 && !(await this.hooks.findOne(filter))) return null;
      }
      if (change.enabled === false)
        await this.hooks.updateOne(
          { ...filter, disabled_at: null },
          { $set: { disabled_at: now, disabled_reason: 'manual' } },
        );
    } catch (error) {
      if (!isDuplicateKeyError(error)) throw error;
      const current = await this.hooks.findOne(filter);
      const existing = await this.hooks.findOne({
        company_id: companyId,
        _id: { $ne: hookId },
        target_url: change.target_url ?? current?.target_url,
        events_key: eventsKey(change.events ?? (current ? eventsOf(current) : [])),
      });
      if (existing) return { existing };
      throw error;
    }
    await this.announce(companyId);
    return this.hooks.findOne(filter);
  }

  /** Re-enables a hook disabled for failing; one disabled because its key was revoked stays disabled. */
  async reenable(companyId: string, hookId: string): Promise<HookDoc | null> {
    const hook = await this.hooks.findOneAndUpdate(
      { company_id: companyId, _id: hookId, disabled_reason: { $ne: 'key_revoked' } },
      { $set: { disabled_at: null, disabled_reason: null, failing_since: null } },
      { returnDocument: 'after' },
    );
    await this.announce(companyId);
    return hook;
  }

  /**
   * Disables every hook the key created (section 13.4), those disabled for failing included (so nothing
   * re-enables them), and tells every process's fan-out at once. Returns how many were enabled until now.
   */
  async disableForRevokedKey(companyId: string, keyId: string, at: Date): Promise<number> {
    const enabled = await this.hooks.updateMany(
      { company_id: companyId, created_by_key_id: keyId, disabled_at: null },
      { $set: { disabled_at: at, disabled_reason: 'key_revoked' } },
    );
    const failing = await this.hooks.updateMany(
      { company_id: companyId, created_by_key_id: keyId, disabled_reason: { $ne: 'key_revoked' } },
      { $set: { disabled_reason: 'key_revoked' } },
    );
    if (enabled.modifiedCount > 0 || failing.modifiedCount > 0) await this.announce(companyId);
    return enabled.modifiedCount;
  }

  async recordSuccess(companyId: string, hookId: string): Promise<void> {
    const reset = await this.hooks.updateOne(
      { company_id: companyId, _id: hookId, failing_since: { $ne: null } },
      { $set: { failing_since: null } },
    );
    if (reset.modifiedCount > 0) await this.announce(companyId);
  }

  /**
   * Notes a failed attempt; returns true when this failure disabled the hook (failing since
   * `disableIfFailingSince` or earlier). The disabling write carries `disabledEvent` (hook.disabled, DECISIONS.md
   * 13.2) in the hook's outbox, so the hook is never disabled without its event; it is moved to `events` at once
   * (the relay moves it should that fail).
   */
  async recordFailure(
    companyId: string,
    hookId: string,
    now: Date,
    disableIfFailingSince: Date,
    disabledEvent?: EventEnvelope,
  ): Promise<boolean> {
    const started = await this.hooks.updateOne(
      { company_id: companyId, _id: hookId, failing_since: null },
      { $set: { failing_since: now } },
    );
    const outbox = disabledEvent ? outboxOnUpdate([disabledEvent]) : undefined;
    const disabled = await this.hooks.updateOne(
      { company_id: companyId, _id: hookId, disabled_at: null, failing_since: { $lte: disableIfFailingSince } },
      {
        $set: { disabled_at: now, disabled_reason: 'failing', ...outbox?.$set },
        ...(outbox ? { $push: outbox.$push, $inc: outbox.$inc } : {}),
      },
    );
    if (started.modifiedCount > 0 || disabled.modifiedCount > 0) await this.announce(companyId);
    if (disabled.modifiedCount === 1 && disabledEvent && this.eventStore) {
      const pending = { _id: hookId, company_id: companyId, pending_events: [disabledEvent] };
      await moveOutboxes(this.hooks as never, [pending as never], this.eventStore).catch(() => {});
    }
    return disabled.modifiedCount === 1;
  }
}
