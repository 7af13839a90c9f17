import type { z } from 'zod';
import type { AuthContext } from '../auth/authenticator.js';
import { buildEvent, diffResources } from '../events/envelope.js';
import { outboxOnInsert } from '../events/outbox.js';
import type { EventPublisher } from '../events/publisher.js';
import type { PipelineDoc, PipelinesRepository } from '../pipelines/repository.js';
import { nextSequence } from '../shared/counters.js';
import {
  NotFoundError,
  PreconditionFailedError,
  ValidationError,
  VersionConflictError,
  type FieldProblem,
} from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import type { CursorCodec } from '../shared/pagination.js';
import { pageOf, parseSort } from '../shared/pagination.js';
import type { Db } from 'mongodb';
import { validateMetadata, type CustomValues } from './custom-fields.js';
import { duplicateTokens, probeTokens } from './duplicates.js';
import type { ItemChanges, ItemDoc, ItemsRepository } from './repository.js';
import {
  toItemResponse,
  type checkDuplicatesBody,
  type createItemBody,
  type ItemResponse,
  type listItemsQuery,
  type updateItemBody,
} from './schemas.js';

const MAX_DUPLICATE_MATCHES = 20;

/** Who makes a change: an API key's company and creator, or an automation acting for a task's creator. */
export type Actor = Pick<AuthContext, 'companyId' | 'userId'>;
const UPDATE_RETRIES = 10;

export interface ItemsServiceDeps {
  db: Db;
  items: ItemsRepository;
  pipelines: PipelinesRepository;
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

function checkPosition(pipeline: PipelineDoc, stageId: string | undefined, statusId: string | null | undefined, problems: FieldProblem[]): void {
  if (stageId !== undefined && !pipeline.stages.some((stage) => stage.stage_id === stageId)) {
    problems.push({ path: 'stage_id', message: 'is not a stage of this pipeline' });
  }
  if (statusId && !pipeline.statuses.some((status) => status.status_id === statusId)) {
    problems.push({ path: 'status_id', message: 'is not a status of this pipeline' });
  }
}

/** Every problem of a position and custom values against a pipeline, with the validated values. */
function checkAgainstPipeline(pipeline: PipelineDoc, input: PositionAndValues, mode: 'create' | 'update'): { custom: CustomValues; problems: FieldProblem[] } {
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

/** `If-Match: "3"` (or a weak `W/"3"`) names the version the client expects. */
function ifMatchAccepts(header: string, version: number): boolean {
  if (header.trim() === '*') return true; // any current representation
  const match = /^(?:W\/)?"(\d+)"$/.exec(header.trim());
  return match !== null && Number(match[1]) === version;
}

function mergeCustom(current: CustomValues, changes: CustomValues): CustomValues {
  const merged = { ...current };
  for (const [name, value] of Object.entries(changes)) {
    if (value === null) delete merged[name];
    else merged[name] = value;
  }
  return merged;
}

export class ItemsService {
  constructor(private readonly deps: ItemsServiceDeps) {}

  private async pipelineFor(companyId: string, pipelineId: string): Promise<PipelineDoc> {
    const pipeline = await this.deps.pipelines.findCached(companyId, pipelineId);
    // A stored item always has its pipeline; pipelines are never deleted.
    if (!pipeline) throw new Error(`pipeline ${pipelineId} of an item is missing`);
    return pipeline;
  }

  /** A new item's pipeline, its position in it and its custom values, with every problem found. */
  async checkNewItem(companyId: string, input: NewItemReferences): Promise<{ pipeline?: PipelineDoc; custom: CustomValues; problems: FieldProblem[] }> {
    const pipeline = await this.deps.pipelines.findCached(companyId, input.pipeline_id);
    if (!pipeline) return { custom: {}, problems: [{ path: 'pipeline_id', message: 'is not a pipeline of this company' }] };
    const { custom, problems } = checkAgainstPipeline(pipeline, input, 'create');
    return { pipeline, custom: mergeCustom({}, custom), problems };
  }

  /** For a PATCH body that failed its schema: its well-formed position and custom values against the item's pipeline. */
  async updateReferenceProblems(companyId: string, itemId: string, input: PositionAndValues): Promise<FieldProblem[]> {
    const current = await this.deps.items.findById(companyId, itemId);
    if (!current) return []; // the 404 comes once the body is valid
    return checkAgainstPipeline(await this.pipelineFor(companyId, current.pipeline_id), input, 'update').problems;
  }

  async create(auth: Actor, body: z.infer<typeof createItemBody>): Promise<ItemResponse> {
    const { pipeline, custom, problems } = await this.checkNewItem(auth.companyId, body);
    if (!pipeline || problems.length > 0) throw new ValidationError(problems);

    const seq = await nextSequence(this.deps.db, `items:${auth.companyId}`);
    const now = new Date();
    const values = { name: body.name, contact_id: body.contact_id ?? null, custom };
    const doc: ItemDoc = {
      _id: newId('item'),
      company_id: auth.companyId,
      short_id: `I-${seq}`,
      name: body.name,
      pipeline_id: pipeline._id,
      stage_id: body.stage_id,
      status_id: body.status_id ?? null,
      contact_id: values.contact_id,
      source: body.source ?? 'api',
      custom,
      dup_tokens: duplicateTokens(pipeline, values),
      version: 1,
      created_at: now,
      updated_at: now,
    };
    const response = toItemResponse(doc, pipeline);
    const events = [buildEvent('item.created', auth.companyId, response, { occurredAt: now })];
    await this.deps.items.insert({ ...doc, ...outboxOnInsert(events) });
    this.deps.publisher.publishRecorded('items', doc._id, events);
    return response;
  }

  async get(auth: AuthContext, itemId: string): Promise<ItemResponse> {
    const doc = await this.deps.items.findById(auth.companyId, itemId);
    if (!doc) throw new NotFoundError('Item');
    return toItemResponse(doc, await this.pipelineFor(auth.companyId, doc.pipeline_id));
  }

  /**
   * Partial update with optimistic locking. `version` (or If-Match) makes a stale write a 409/412;
   * without it the write still goes through a compare-and-set on the version it read, retried on a
   * race, so no concurrent change is ever silently overwritten. A no-op changes nothing.
   */
  async update(
    auth: Actor,
    itemId: string,
    body: z.infer<typeof updateItemBody>,
    ifMatch?: string,
    options: { depth?: number } = {},
  ): Promise<ItemResponse> {
    for (let attempt = 0; attempt < UPDATE_RETRIES; attempt++) {
      const current = await this.deps.items.findById(auth.companyId, itemId);
      if (!current) throw new NotFoundError('Item');
      const pipeline = await this.pipelineFor(auth.companyId, current.pipeline_id);

      const { custom: metadata, problems } = checkAgainstPipeline(pipeline, body, 'update');
      ValidationError.throwIfAny(problems);

      if (ifMatch !== undefined && !ifMatchAccepts(ifMatch, current.version)) {
        throw new PreconditionFailedError(current.version);
      }
      if (body.version !== undefined && body.version !== current.version) throw new VersionConflictError(current.version);

      const next = {
        name: body.name ?? current.name,
        stage_id: body.stage_id ?? current.stage_id,
        status_id: body.status_id === undefined ? current.status_id : body.status_id,
        contact_id: body.contact_id === undefined ? current.contact_id : body.contact_id,
        custom: mergeCustom(current.custom, metadata),
      };
      const before = toItemResponse(current, pipeline);
      const now = new Date();
      const afterDoc: ItemDoc = { ...current, ...next, version: current.version + 1, updated_at: now };
      const after = toItemResponse(afterDoc, pipeline);
      const changes = diffResources(before, after, ['updated_at', 'version']);
      if (Object.keys(changes).length === 0) return before;

      const update: ItemChanges = { ...next, dup_tokens: duplicateTokens(pipeline, next) };
      const events = [buildEvent('item.updated', auth.companyId, after, { changes, occurredAt: now, depth: options.depth })];
      const saved = await this.deps.items.updateIfVersion(auth.companyId, itemId, current.version, update, now, events);
      if (saved) {
        this.deps.publisher.publishRecorded('items', itemId, events);
        return toItemResponse(saved, pipeline);
      }
      // Someone else wrote first. With an explicit expectation that is a conflict; otherwise re-read and retry.
      if (body.version !== undefined || ifMatch !== undefined) {
        const latest = await this.deps.items.findById(auth.companyId, itemId);
        if (!latest) throw new NotFoundError('Item');
        if (body.version !== undefined) throw new VersionConflictError(latest.version);
        throw new PreconditionFailedError(latest.version);
      }
    }
    throw new VersionConflictError((await this.deps.items.findById(auth.companyId, itemId))?.version ?? 0);
  }

  async list(auth: AuthContext, query: z.infer<typeof listItemsQuery>): Promise<{ items: ItemResponse[]; nextCursor?: string }> {
    const sort = parseSort(query.sort);
    const { cursor: rawCursor, limit, sort: _sort, ...filter } = query;
    const codec = await this.deps.cursors();
    const scope = `items:${auth.companyId}:${JSON.stringify({ ...filter, sort: query.sort })}`;
    const cursor = rawCursor ? codec.decode(rawCursor, scope) : undefined;
    const rows = await this.deps.items.list(auth.companyId, filter, sort, limit + 1, cursor);
    const page = pageOf(rows, limit, (row) => row[sort.field as 'created_at' | 'updated_at'], (value, id) => codec.encode({ scope, value, id }));
    const pipelineIds = [...new Set(page.rows.map((row) => row.pipeline_id))];
    const pipelines = new Map<string, PipelineDoc>();
    for (const id of pipelineIds) pipelines.set(id, await this.pipelineFor(auth.companyId, id));
    return { items: page.rows.map((row) => toItemResponse(row, pipelines.get(row.pipeline_id)!)), nextCursor: page.nextCursor };
  }

  /** Applies the pipeline's duplicate_detection config; never writes anything. */
  async checkDuplicates(auth: AuthContext, body: z.infer<typeof checkDuplicatesBody>) {
    const pipeline = await this.deps.pipelines.findCached(auth.companyId, body.pipeline_id);
    if (!pipeline) throw ValidationError.single('pipeline_id', 'is not a pipeline of this company');
    const probes = probeTokens(pipeline, body);
    const config = pipeline.duplicate_detection;
    // "all" needs a value for every configured field; "any" needs at least one.
    if (probes.size === 0 || (config.match === 'all' && probes.size < config.fields.length)) {
      return { has_duplicates: false, matches: [] };
    }
    const tokens = [...probes.values()];
    const rows = await this.deps.items.findByTokens(auth.companyId, pipeline._id, tokens, config.match, MAX_DUPLICATE_MATCHES);
    const matches = rows.map((row) => ({
      item: toItemResponse(row, pipeline),
      matched_fields: [...probes].filter(([, token]) => row.dup_tokens.includes(token)).map(([field]) => field),
    }));
    return { has_duplicates: matches.length > 0, matches };
  }
}
