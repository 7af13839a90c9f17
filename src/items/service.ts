import { LRUCache } from 'lru-cache';
import { buildCompanyEvent } from '../contracts/company-events.js';
import { validateMetadata, type CustomValues } from '../contracts/custom-fields.js';
import { diffResources } from '../contracts/envelope.js';
import {
  toItemResponse,
  type checkDuplicatesBody,
  type createItemBody,
  type ItemResponse,
  type listItemsQuery,
  type updateItemBody,
  type upsertItemBody,
  type ItemDoc,
} from '../contracts/items.js';
import {
  AppError,
  ExternalIdTakenError,
  NotFoundError,
  PreconditionFailedError,
  ValidationError,
  VersionConflictError,
  type FieldProblem,
} from '../shared/errors.js';
import { ifMatchAccepts, versionEtag } from '../shared/etag.js';
import { companyScopedKey, newId } from '../shared/ids.js';
import { must } from '../shared/must.js';
import { retryLostRaces } from '../shared/optimistic.js';
import { outboxOnInsert } from '../shared/outbox.js';
import { pageOf, parseSort } from '../shared/pagination.js';
import { duplicateTokens, probeTokens } from './duplicates.js';
import { type ItemChanges, type ItemsRepository } from './repository.js';
import { itemSearch, nameWords } from './search.js';
import type { Actor } from '../contracts/auth-context.js';
import type { PipelineDoc } from '../contracts/pipelines.js';
import type { EventPublisher } from '../shared/outbox.js';
import type { CursorCodec } from '../shared/pagination.js';
import type { z } from 'zod';

const MAX_DUPLICATE_MATCHES = 20;

/** Who makes a change: an API key's company and creator, or an automation acting for a task's creator. */
const UPDATE_RETRIES = 10;
/**
 * Items whose latest known version this process keeps (see ItemsService.recent): enough to cover a client's
 * GET and its PATCH, also one that reads a few hundred items before it updates them; with fewer, each of those
 * PATCHes would read its item first, two round trips where one will do.
 */
const RECENT_ITEMS = 1_000;

export interface ItemsServiceDeps {
  items: ItemsRepository;
  /** The pipelines feature's cached read: an item is validated and shaped by its pipeline. */
  pipelines: { findCached(companyId: string, pipelineId: string): Promise<PipelineDoc | null> };
  publisher: EventPublisher;
  cursors: () => Promise<CursorCodec>;
}

/** The parts of an item body that are judged against its pipeline. */
interface PositionAndValues {
  stage_id?: string;
  status_id?: string | null;
  metadata?: Record<string, unknown>;
}

interface NewItemReferences extends PositionAndValues {
  pipeline_id: string;
}

type NewItemInput = Omit<z.infer<typeof createItemBody>, 'external_id'> & { external_id?: string };
/** What an update may change: the PATCH body's fields, and `source` for an upsert (which takes the create body). */
type ItemUpdateInput = Omit<z.infer<typeof updateItemBody>, 'version'> & { source?: string };

function checkPosition(
  pipeline: PipelineDoc,
  stageId: string | undefined,
  statusId: string | null | undefined,
  problems: FieldProblem[],
): void {
  if (stageId !== undefined && !pipeline.stages.some((stage) => stage.stage_id === stageId)) {
    problems.push({ path: 'stage_id', message: 'is not a stage of this pipeline' });
  }
  if (statusId && !pipeline.statuses.some((status) => status.status_id === statusId)) {
    problems.push({ path: 'status_id', message: 'is not a status of this pipeline' });
  }
}

/** Every problem of a position and custom values against a pipeline, with the validated values. */
export function checkAgainstPipeline(
  pipeline: PipelineDoc,
  input: PositionAndValues,
  mode: 'create' | 'update',
): { custom: CustomValues; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  checkPosition(pipeline, input.stage_id, input.status_id, problems);
  let custom: CustomValues = {};
  try {
    custom = validateMetadata(pipeline, input.metadata ?? {}, mode);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    problems.push(...error.errors);
  }
  return { custom, problems };
}

/** Without a prototype, so any field name (even `__proto__` in old data) is an own key like the others. */
export function mergeCustom(current: CustomValues, changes: CustomValues): CustomValues {
  const merged: CustomValues = Object.assign(Object.create(null), current);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null) delete merged[name];
    else merged[name] = value;
  }
  return merged;
}

export class ItemsService {
  /** short_id numbers, taken from the company's counter in blocks (one counter write per block). */

  /**
   * The latest version of items this process read or wrote, so a PATCH carrying that `version` needs
   * no read: every write of an item's content increases its version (outbox bookkeeping aside, which
   * reads leave out), so an item at a given version is always the same. The conditional write then
   * proves the version is still current; if it is not, the usual read decides between 409 and 404.
   */
  private readonly recentItems = new LRUCache<string, ItemDoc>({ max: RECENT_ITEMS });

  constructor(private readonly deps: ItemsServiceDeps) {}

  /** Kept as read or written; nothing modifies a kept document (an update builds a new one). */
  private remember(doc: ItemDoc): void {
    this.recentItems.set(companyScopedKey(doc.company_id, doc._id), doc);
  }

  /** The item at exactly `version` when this process has seen it so. */
  private recent(companyId: string, itemId: string, version: number): ItemDoc | undefined {
    const kept = this.recentItems.get(companyScopedKey(companyId, itemId));
    return kept?.version === version ? kept : undefined;
  }

  private async pipelineFor(companyId: string, pipelineId: string): Promise<PipelineDoc> {
    const pipeline = await this.deps.pipelines.findCached(companyId, pipelineId);
    // A stored item always has its pipeline; pipelines are never deleted.
    if (!pipeline) throw new Error(`pipeline ${pipelineId} of an item is missing`);
    return pipeline;
  }

  /** A new item's pipeline, its position in it and its custom values, with every problem found. */
  async checkNewItem(
    companyId: string,
    input: NewItemReferences,
  ): Promise<{ pipeline?: PipelineDoc; custom: CustomValues; problems: FieldProblem[] }> {
    const pipeline = await this.deps.pipelines.findCached(companyId, input.pipeline_id);
    if (!pipeline)
      return { custom: {}, problems: [{ path: 'pipeline_id', message: 'is not a pipeline of this company' }] };
    const { custom, problems } = checkAgainstPipeline(pipeline, input, 'create');
    return { pipeline, custom: mergeCustom({}, custom), problems };
  }

  /** For a PATCH body that failed its schema: its well-formed position and custom values against the item's pipeline. */
  async updateReferenceProblems(companyId: string, itemId: string, input: PositionAndValues): Promise<FieldProblem[]> {
    const current = await this.deps.items.findById(companyId, itemId);
    if (!current) return []; // the 404 comes once the body is valid
    return checkAgainstPipeline(await this.pipelineFor(companyId, current.pipeline_id), input, 'update').problems;
  }

  /** A new item's pipeline and validated custom values; a ValidationError lists every problem. */
  private async validateNew(companyId: string, body: NewItemReferences) {
    const { pipeline, custom, problems } = await this.checkNewItem(companyId, body);
    if (!pipeline || problems.length > 0) throw new ValidationError(problems);
    return { pipeline, custom };
  }

  /** The stored document of a validated new item and its item.created event (recorded in the same insert). */
  private buildNew(
    actor: Actor,
    body: NewItemInput,
    checked: { pipeline: PipelineDoc; custom: CustomValues },
    seq: number,
    now: Date,
  ) {
    const { pipeline, custom } = checked;
    const values = { name: body.name, contact_id: body.contact_id ?? null, custom };
    const doc: ItemDoc = {
      _id: newId('item'),
      company_id: actor.companyId,
      short_id: `I-${seq}`,
      name: body.name,
      pipeline_id: pipeline._id,
      stage_id: body.stage_id,
      status_id: body.status_id ?? null,
      contact_id: values.contact_id,
      source: body.source ?? 'api',
      external_id: body.external_id ?? null,
      custom,
      dup_tokens: duplicateTokens(pipeline, values),
      name_words: nameWords(body.name),
      version: 1,
      created_at: now,
      updated_at: now,
    };
    const response = toItemResponse(doc, pipeline);
    const events = [
      buildCompanyEvent('item.created', actor.companyId, response, { actor: actor.cause, occurredAt: now }),
    ];
    return { doc: { ...doc, ...outboxOnInsert(events) }, response, events };
  }

  async create(actor: Actor, body: NewItemInput): Promise<ItemResponse> {
    const checked = await this.validateNew(actor.companyId, body);
    const seq = await this.deps.items.nextShortId(actor.companyId);
    const created = this.buildNew(actor, body, checked, seq, new Date());
    await this.deps.items.insert(created.doc);
    this.deps.publisher.publishRecorded('items', created.doc._id, created.events);
    const { pending_events: _events, outbox_pending: _pending, outbox_bytes: _bytes, ...stored } = created.doc;
    this.remember(stored);
    return created.response;
  }

  /**
   * Many creates at once (the batch route): one short_id block, one unordered insert, each item with
   * its own event. Each entry stands alone: its result is the item or the error that kept it out.
   */
  async createMany(actor: Actor, bodies: NewItemInput[]): Promise<Array<ItemResponse | AppError>> {
    const checked = await Promise.all(
      bodies.map((body) =>
        this.validateNew(actor.companyId, body).catch((error: unknown) => {
          if (error instanceof AppError) return error;
          throw error;
        }),
      ),
    );
    const valid = checked.filter((entry) => !(entry instanceof AppError)).length;
    const last = valid === 0 ? 0 : await this.deps.items.reserveShortIds(actor.companyId, valid);
    let seq = last - valid;
    const now = new Date();
    const built = checked.map((entry, index) =>
      entry instanceof AppError
        ? entry
        : this.buildNew(actor, must(bodies[index], 'a body per entry'), entry, ++seq, now),
    );
    const toInsert = built.filter((entry): entry is Exclude<typeof entry, AppError> => !(entry instanceof AppError));
    const outcomes = await this.deps.items.insertMany(toInsert.map((entry) => entry.doc));
    const failed = new Map(toInsert.map((entry, index) => [entry, outcomes[index]]));
    return built.map((entry) => {
      if (entry instanceof AppError) return entry;
      const error = failed.get(entry);
      if (error) return error;
      this.deps.publisher.publishRecorded('items', entry.doc._id, entry.events);
      return entry.response;
    });
  }

  async get(actor: Actor, itemId: string): Promise<ItemResponse> {
    const doc = await this.deps.items.findById(actor.companyId, itemId);
    if (!doc) throw new NotFoundError('Item');
    this.remember(doc); // the client is likely to send this version back with a PATCH
    return toItemResponse(doc, await this.pipelineFor(actor.companyId, doc.pipeline_id));
  }

  /**
   * Partial update with optimistic locking. `version` (or If-Match) makes a stale write a 409/412;
   * without it the write still goes through a compare-and-set on the version it read, retried on a
   * race, so no concurrent change is ever silently overwritten. A no-op changes nothing.
   */
  async update(
    actor: Actor,
    itemId: string,
    body: z.infer<typeof updateItemBody>,
    ifMatch?: string,
    options: { depth?: number } = {},
  ): Promise<ItemResponse> {
    // With `version` alone, the item as this process last saw it at that version stands in for the
    // read (If-Match is compared with the stored version, so it always reads).
    const known = body.version !== undefined && ifMatch === undefined;
    let recent = known ? this.recent(actor.companyId, itemId, body.version!) : undefined;
    return retryLostRaces('item', UPDATE_RETRIES, async () => {
      const current = recent ?? (await this.deps.items.findById(actor.companyId, itemId));
      if (!current) throw new NotFoundError('Item');
      const confirmed = recent === undefined;
      recent = undefined;
      return this.applyUpdate(actor, current, body, { version: body.version, ifMatch, confirmed }, options.depth);
    });
  }

  /**
   * PUT by external id (DECISIONS.md section 12.3): updates the company's item with that external id,
   * or creates it. Concurrent upserts of one id never create two: the loser of the insert race hits
   * the unique index and retries as an update.
   */
  async upsert(
    actor: Actor,
    externalId: string,
    body: z.infer<typeof upsertItemBody>,
    ifMatch?: string,
  ): Promise<{ item: ItemResponse; created: boolean }> {
    const { version, ...fields } = body;
    return retryLostRaces('item', UPDATE_RETRIES, async () => {
      const current = await this.deps.items.findByExternalId(actor.companyId, externalId);
      if (!current) {
        // There is no current version for an expectation to match (RFC 9110: If-Match fails).
        if (ifMatch !== undefined) throw new PreconditionFailedError();
        if (version !== undefined) throw new VersionConflictError(0);
        const checked = await this.validateNew(actor.companyId, fields);
        const seq = await this.deps.items.nextShortId(actor.companyId);
        const created = this.buildNew(actor, { ...fields, external_id: externalId }, checked, seq, new Date());
        try {
          await this.deps.items.insert(created.doc);
        } catch (error) {
          if (error instanceof ExternalIdTakenError) return null; // created meanwhile: update it instead
          throw error;
        }
        this.deps.publisher.publishRecorded('items', created.doc._id, created.events);
        return { item: created.response, created: true };
      }
      if (fields.pipeline_id !== current.pipeline_id) {
        throw ValidationError.single('pipeline_id', 'an existing item cannot move to another pipeline');
      }
      const { pipeline_id: _pipeline, ...changes } = fields;
      const saved = await this.applyUpdate(actor, current, changes, { version, ifMatch });
      return saved && { item: saved, created: false };
    });
  }

  /**
   * One compare-and-set of `changes` on the item as read. Returns the item after it (or as it is, for
   * a no-op), or null when another writer won and the caller should re-read and retry; with an
   * explicit expectation a lost race is the 409/412 instead.
   */
  private async applyUpdate(
    actor: Actor,
    current: ItemDoc,
    changes: ItemUpdateInput,
    expected: { version?: number; ifMatch?: string; confirmed?: boolean },
    depth?: number,
  ): Promise<ItemResponse | null> {
    const pipeline = await this.pipelineFor(actor.companyId, current.pipeline_id);
    const { custom: metadata, problems } = checkAgainstPipeline(pipeline, changes, 'update');
    ValidationError.throwIfAny(problems);
    const { version, ifMatch } = expected;
    if (ifMatch !== undefined && !ifMatchAccepts(ifMatch, versionEtag(current.version))) {
      throw new PreconditionFailedError(current.version);
    }
    if (version !== undefined && version !== current.version) throw new VersionConflictError(current.version);

    const next = {
      name: changes.name ?? current.name,
      stage_id: changes.stage_id ?? current.stage_id,
      status_id: changes.status_id === undefined ? current.status_id : changes.status_id,
      contact_id: changes.contact_id === undefined ? current.contact_id : changes.contact_id,
      source: changes.source ?? current.source,
      external_id: changes.external_id === undefined ? (current.external_id ?? null) : changes.external_id,
      custom: mergeCustom(current.custom, metadata),
    };
    const before = toItemResponse(current, pipeline);
    const now = new Date();
    const afterDoc: ItemDoc = { ...current, ...next, version: current.version + 1, updated_at: now };
    const after = toItemResponse(afterDoc, pipeline);
    const diff = diffResources(before, after, ['updated_at', 'version']);
    if (Object.keys(diff).length === 0) {
      // A no-op writes nothing, so nothing proves a remembered version current: read it (null: re-read).
      return expected.confirmed === false ? null : before;
    }

    const update: ItemChanges = {
      ...next,
      dup_tokens: duplicateTokens(pipeline, next),
      name_words: nameWords(next.name),
    };
    const events = [
      buildCompanyEvent('item.updated', actor.companyId, after, {
        actor: actor.cause,
        changes: diff,
        occurredAt: now,
        depth,
      }),
    ];
    const saved = await this.deps.items.updateIfVersion(
      actor.companyId,
      current._id,
      current.version,
      update,
      now,
      events,
    );
    if (saved) {
      this.deps.publisher.publishRecorded('items', current._id, events);
      this.remember(saved);
      return toItemResponse(saved, pipeline);
    }
    // Someone else wrote first. With an explicit expectation that is a conflict; otherwise re-read and retry.
    if (version === undefined && ifMatch === undefined) return null;
    const latest = await this.deps.items.findById(actor.companyId, current._id);
    if (!latest) throw new NotFoundError('Item');
    if (version !== undefined) throw new VersionConflictError(latest.version);
    throw new PreconditionFailedError(latest.version);
  }

  /**
   * Archives the item (DECISIONS.md section 12.3): reads 404 afterwards, its tasks stay, and
   * item.deleted carries the item as it was. A compare-and-set on the version read, retried on a race.
   */
  async delete(actor: Actor, itemId: string, ifMatch?: string): Promise<void> {
    await retryLostRaces('item', UPDATE_RETRIES, async () => {
      const current = await this.deps.items.findById(actor.companyId, itemId);
      if (!current) throw new NotFoundError('Item');
      if (ifMatch !== undefined && !ifMatchAccepts(ifMatch, versionEtag(current.version))) {
        throw new PreconditionFailedError(current.version);
      }
      const pipeline = await this.pipelineFor(actor.companyId, current.pipeline_id);
      const now = new Date();
      const events = [
        buildCompanyEvent('item.deleted', actor.companyId, toItemResponse(current, pipeline), {
          actor: actor.cause,
          occurredAt: now,
        }),
      ];
      if (!(await this.deps.items.archive(current, now, events))) return null;
      this.deps.publisher.publishRecorded('items', itemId, events);
      return true;
    });
  }

  async list(
    actor: Actor,
    query: z.infer<typeof listItemsQuery>,
  ): Promise<{ items: ItemResponse[]; nextCursor?: string }> {
    const sort = parseSort(query.sort);
    const { cursor: rawCursor, limit, sort: _sort, ...filter } = query;
    const { pipeline_id, stage_id, status_id, contact_id, external_id, created_after, updated_after, q, ...metadata } =
      filter;
    const search = await this.searchOf(actor.companyId, pipeline_id, q, metadata);
    const codec = await this.deps.cursors();
    const scope = `items:${actor.companyId}:${JSON.stringify({ ...filter, sort: query.sort })}`;
    const cursor = rawCursor ? codec.decode(rawCursor, scope) : undefined;
    const rows = this.deps.items.listCursor(
      actor.companyId,
      { pipeline_id, stage_id, status_id, contact_id, external_id, created_after, updated_after, ...search },
      sort,
      limit + 1,
      cursor,
    );
    const page = await pageOf(
      rows,
      limit,
      (row) => row[sort.field as 'created_at' | 'updated_at'],
      (value, id) => codec.encode({ scope, value, id }),
    );
    const pipelineIds = [...new Set(page.rows.map((row) => row.pipeline_id))];
    const pipelines = new Map<string, PipelineDoc>();
    for (const id of pipelineIds) pipelines.set(id, await this.pipelineFor(actor.companyId, id));
    return {
      items: page.rows.map((row) => toItemResponse(row, pipelines.get(row.pipeline_id)!)),
      nextCursor: page.nextCursor,
    };
  }

  /** The conditions of `q` and the custom-field filters; the filters are judged against pipeline_id's fields. */
  private async searchOf(companyId: string, pipelineId: string | undefined, q: string | undefined, filters: object) {
    if (q === undefined && Object.keys(filters).length === 0) return {};
    const pipeline = pipelineId === undefined ? undefined : await this.deps.pipelines.findCached(companyId, pipelineId);
    if (pipelineId !== undefined && !pipeline && Object.keys(filters).length > 0)
      throw ValidationError.single('pipeline_id', 'is not a pipeline of this company');
    return itemSearch(pipeline ?? undefined, q, filters as Record<string, unknown>);
  }

  /** Applies the pipeline's duplicate_detection config; never writes anything. */
  async checkDuplicates(actor: Actor, body: z.infer<typeof checkDuplicatesBody>) {
    const pipeline = await this.deps.pipelines.findCached(actor.companyId, body.pipeline_id);
    if (!pipeline) throw ValidationError.single('pipeline_id', 'is not a pipeline of this company');
    const probes = probeTokens(pipeline, body);
    const config = pipeline.duplicate_detection;
    // "all" needs a value for every configured field; "any" needs at least one.
    if (probes.size === 0 || (config.match === 'all' && probes.size < config.fields.length)) {
      return { has_duplicates: false, matches: [] };
    }
    const tokens = [...probes.values()];
    const rows = await this.deps.items.findByTokens(
      actor.companyId,
      pipeline._id,
      tokens,
      config.match,
      MAX_DUPLICATE_MATCHES,
    );
    const matches = rows.map((row) => ({
      item: toItemResponse(row, pipeline),
      matched_fields: [...probes].filter(([, token]) => row.dup_tokens.includes(token)).map(([field]) => field),
    }));
    return { has_duplicates: matches.length > 0, matches };
  }
}
