import { resourceOf } from '../contracts/envelope.js';
import { EVENT_TYPES, type EventType } from '../contracts/envelope.js';
import { InsufficientScopeError, NotFoundError, ValidationError } from '../shared/errors.js';
import { readWithinBudget, type CursorCodec } from '../shared/pagination.js';
import { toFeedEvent, type FeedEvent, type ListEventsQuery } from './schemas.js';
import type { AuthContext } from '../contracts/auth-context.js';
import type { FeedWaiters } from './feed-waiters.js';
import type { EventsRepository } from './repository.js';
import type { SequencerStore } from './sequencer-store.js';

/** Which scope shows which events (DECISIONS.md sections 12.1 and 13.2: hook events with hooks:manage). */
function scopeOf(type: EventType): 'tasks:read' | 'items:read' | 'hooks:manage' {
  const resource = resourceOf(type);
  return resource === 'task' ? 'tasks:read' : resource === 'hook' ? 'hooks:manage' : 'items:read';
}

/** The event types a key may read; 403 when it may read none. */
export function visibleTypes(auth: Pick<AuthContext, 'scopes'>): EventType[] {
  const visible = EVENT_TYPES.filter((type) => auth.scopes.has(scopeOf(type)));
  if (visible.length === 0) throw new InsufficientScopeError('tasks:read');
  return visible;
}

/** What a feed cursor is bound to: the company, the filters and the visible types it was issued for. */
function feedScope(companyId: string, filter: object, types: EventType[]): string {
  return `feed:${companyId}:${JSON.stringify({ ...filter, types })}`;
}

export interface EventFeedDeps {
  events: Pick<EventsRepository, 'list' | 'findById'>;
  sequences: Pick<SequencerStore, 'readableOf'>;
  cursors: () => Promise<CursorCodec>;
  /** Whether the key is one of the company's (exclude_actor names a key of the caller's company). */
  keyOfCompany(companyId: string, keyId: string): Promise<boolean>;
  waiters: FeedWaiters;
}

/**
 * The events feed (DECISIONS.md section 13.1): the company's events in sequence order, read forward
 * from a position. Every answer carries the position after what it returned (the same one when it
 * returned nothing), so a client resumes exactly where it stopped; with `wait`, an answer that would
 * be empty waits for the company's next readable events.
 */
export class EventFeed {
  constructor(private readonly deps: EventFeedDeps) {}

  async list(
    auth: AuthContext,
    query: ListEventsQuery,
    signal?: AbortSignal,
  ): Promise<{ events: FeedEvent[]; nextCursor: string }> {
    const visible = visibleTypes(auth);
    const hidden = query.type?.find((type) => !visible.includes(type));
    if (hidden) throw new InsufficientScopeError(scopeOf(hidden));
    const types = query.type ?? visible;
    const { cursor: rawCursor, limit, after, wait, ...filter } = query;
    if (filter.exclude_actor !== undefined && !(await this.deps.keyOfCompany(auth.companyId, filter.exclude_actor)))
      throw ValidationError.single('exclude_actor', 'is not an API key of this company');
    const codec = await this.deps.cursors();
    // A cursor is only valid for the company, filters and visible types it was issued for.
    const scope = feedScope(auth.companyId, filter, types);
    const position = rawCursor ? codec.decode(rawCursor, scope).value : (after ?? 0);
    const feedFilter = {
      types,
      occurredAfter: query.occurred_after,
      occurredBefore: query.occurred_before,
      resourceId: query.resource_id,
      excludeActor: query.exclude_actor,
    };
    const deadline = Date.now() + wait * 1_000;
    for (;;) {
      const readable = await this.deps.sequences.readableOf(auth.companyId);
      const rows =
        readable > position
          ? await readWithinBudget(
              this.deps.events.list(auth.companyId, feedFilter, limit, { afterSequence: position, readable }),
            )
          : [];
      const remaining = deadline - Date.now();
      if (rows.length > 0 || remaining <= 0 || signal?.aborted) {
        const last = rows.at(-1)?.sequence ?? position;
        return {
          events: rows.map((row) => toFeedEvent(row.event, row.sequence)),
          nextCursor: codec.encode({ scope, value: last, id: '' }),
        };
      }
      // Woken when the sequencer makes more of the company's events readable; then read again.
      await this.deps.waiters.wait(auth.companyId, readable, remaining, signal);
    }
  }

  /**
   * The company's readable position now, as a cursor of the unfiltered feed for this key (`GET /v1/ext/events?cursor=`):
   * every event readable so far is at or before it. An export takes it before it reads (docs/export.md).
   */
  async currentPosition(auth: AuthContext): Promise<string> {
    const types = visibleTypes(auth);
    const codec = await this.deps.cursors();
    const readable = await this.deps.sequences.readableOf(auth.companyId);
    return codec.encode({ scope: feedScope(auth.companyId, {}, types), value: readable, id: '' });
  }

  async get(auth: AuthContext, eventId: string): Promise<FeedEvent> {
    const visible = visibleTypes(auth);
    const doc = eventId.length <= 100 ? await this.deps.events.findById(auth.companyId, eventId) : null;
    // An event of a kind the key may not read is as absent as another company's.
    if (!doc || !visible.includes(doc.event.type)) throw new NotFoundError('Event');
    return toFeedEvent(doc.event);
  }
}
