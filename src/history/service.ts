import {
  toHistoryEntry,
  type HistoryQuery,
  type ItemHistoryEntry,
  type TaskHistoryEntry,
} from '../contracts/history.js';
import { NotFoundError } from '../shared/errors.js';
import { companyScopedKey } from '../shared/ids.js';
import type { RecordKind } from '../contracts/history-rows.js';
import type { ItemResponse } from '../contracts/items.js';
import type { CursorCodec } from '../shared/pagination.js';
import type { HistoryRepository } from './repository.js';

export interface HistoryServiceDeps {
  history: Pick<HistoryRepository, 'page' | 'latestAt' | 'retainedSince'>;
  /** Whether the company has (or had: archived counts) the record. */
  recordKnown(kind: RecordKind, companyId: string, id: string): Promise<boolean>;
  cursors: () => Promise<CursorCodec>;
}

/**
 * Reads of the record history (docs/items.md, "History"): a record's changes newest first, and an item as
 * it was at a time. Both are served by an index per record; another company's record is as absent as an
 * unknown one.
 */
export class HistoryService {
  constructor(private readonly deps: HistoryServiceDeps) {}

  itemHistory(companyId: string, itemId: string, query: HistoryQuery) {
    return this.list<ItemHistoryEntry>(companyId, 'item', itemId, query);
  }

  taskHistory(companyId: string, taskId: string, query: HistoryQuery) {
    return this.list<TaskHistoryEntry>(companyId, 'task', taskId, query);
  }

  private async list<E extends ItemHistoryEntry | TaskHistoryEntry>(
    companyId: string,
    kind: RecordKind,
    id: string,
    query: HistoryQuery,
  ): Promise<{ entries: E[]; nextCursor?: string }> {
    const notFound = new NotFoundError(kind === 'item' ? 'Item' : 'Task');
    const codec = await this.deps.cursors();
    const scope = `history:${companyScopedKey(companyId, id)}`;
    // The cursor is checked first: a tampered one is a 400 whatever the record.
    const before = query.cursor ? codec.decode(query.cursor, scope).value : undefined;
    if (id.length > 100 || !(await this.deps.recordKnown(kind, companyId, id))) throw notFound;
    const rows = await this.deps.history.page(companyId, id, query.limit + 1, before).toArray();
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return {
      entries: page.map((row) => toHistoryEntry(row) as E),
      ...(rows.length > query.limit && last
        ? { nextCursor: codec.encode({ scope, value: last.sequence, id: '' }) }
        : {}),
    };
  }

  /** The item's API shape as it was at `at`; 404 when it did not exist then (or was deleted) or `at` is past retention. */
  async itemAsOf(companyId: string, itemId: string, at: Date): Promise<ItemResponse> {
    if (itemId.length > 100 || at < this.deps.history.retainedSince()) throw new NotFoundError('Item');
    const row = await this.deps.history.latestAt(companyId, itemId, at);
    if (!row || row.kind !== 'item' || row.type === 'item.deleted') throw new NotFoundError('Item');
    return row.snapshot as ItemResponse;
  }
}
