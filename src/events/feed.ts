import { InsufficientScopeError, NotFoundError } from '../shared/errors.js';
import { pageOf, type CursorCodec } from '../shared/pagination.js';
import { EVENT_TYPES, type EventType } from './envelope.js';
import { toFeedEvent, type FeedEvent, type ListEventsQuery } from './schemas.js';
import type { AuthContext } from '../auth/authenticator.js';
import type { EventsRepository } from './repository.js';

/** Which scope shows which events (DECISIONS.md section 12.1). */
function scopeOf(type: EventType): 'tasks:read' | 'items:read' {
  return type.startsWith('task.') ? 'tasks:read' : 'items:read';
}

/** The event types a key may read; 403 when it may read none. */
export function visibleTypes(auth: Pick<AuthContext, 'scopes'>): EventType[] {
  const visible = EVENT_TYPES.filter((type) => auth.scopes.has(scopeOf(type)));
  if (visible.length === 0) throw new InsufficientScopeError('tasks:read');
  return visible;
}

/** The events feed: the company's events, oldest first, keyset-paged; what a key's scopes show. */
export class EventFeed {
  constructor(private readonly deps: { events: EventsRepository; cursors: () => Promise<CursorCodec> }) {}

  async list(auth: AuthContext, query: ListEventsQuery): Promise<{ events: FeedEvent[]; nextCursor?: string }> {
    const visible = visibleTypes(auth);
    const hidden = query.type?.find((type) => !visible.includes(type));
    if (hidden) throw new InsufficientScopeError(scopeOf(hidden));
    const types = query.type ?? visible;
    const { cursor: rawCursor, limit, ...filter } = query;
    const codec = await this.deps.cursors();
    // A cursor is only valid for the company, filters and visible types it was issued for.
    const scope = `events:${auth.companyId}:${JSON.stringify({ ...filter, types })}`;
    const cursor = rawCursor ? codec.decode(rawCursor, scope) : undefined;
    const rows = await this.deps.events.list(
      auth.companyId,
      {
        types,
        occurredAfter: query.occurred_after,
        occurredBefore: query.occurred_before,
        resourceId: query.resource_id,
      },
      limit + 1,
      cursor ? { occurredAt: new Date(cursor.value), id: cursor.id } : undefined,
    );
    const page = await pageOf(
      rows,
      limit,
      (row) => row.occurred_at,
      (value, id) => codec.encode({ scope, value, id }),
    );
    return { events: page.rows.map((row) => toFeedEvent(row.event)), nextCursor: page.nextCursor };
  }

  async get(auth: AuthContext, eventId: string): Promise<FeedEvent> {
    const visible = visibleTypes(auth);
    const doc = eventId.length <= 100 ? await this.deps.events.findById(auth.companyId, eventId) : null;
    // An event of a kind the key may not read is as absent as another company's.
    if (!doc || !visible.includes(doc.event.type)) throw new NotFoundError('Event');
    return toFeedEvent(doc.event);
  }
}
