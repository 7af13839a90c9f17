import { DEFAULT_DUPLICATE_DETECTION } from '../contracts/pipelines.js';
import { NotFoundError, ValidationError, type FieldProblem } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { retryLostRaces } from '../shared/optimistic.js';
import type {
  PipelineDoc,
  createPipelineBody,
  DuplicateDetection,
  FieldDefinition,
  updatePipelineBody,
} from '../contracts/pipelines.js';
import type { Rows } from '../shared/pagination.js';
import type { PipelinesRepository } from './repository.js';
import type { z } from 'zod';

const CORE_DUPLICATE_FIELDS = new Set(['name', 'contact_id']);
const COMPARABLE_FIELD_TYPES = new Set(['text', 'email', 'url', 'number', 'select']);

function checkFieldNamesUnique(fields: FieldDefinition[], problems: FieldProblem[]): void {
  const seen = new Set<string>();
  fields.forEach((field, index) => {
    if (seen.has(field.name)) problems.push({ path: `fields.${index}.name`, message: 'is already defined' });
    seen.add(field.name);
  });
}

function checkDuplicateDetection(
  config: DuplicateDetection,
  fields: FieldDefinition[],
  problems: FieldProblem[],
): void {
  config.fields.forEach((name, index) => {
    if (CORE_DUPLICATE_FIELDS.has(name)) return;
    const field = fields.find((candidate) => candidate.name === name);
    if (!field) problems.push({ path: `duplicate_detection.fields.${index}`, message: `unknown field '${name}'` });
    else if (!COMPARABLE_FIELD_TYPES.has(field.type)) {
      problems.push({
        path: `duplicate_detection.fields.${index}`,
        message: `${field.type} fields cannot be compared`,
      });
    }
  });
}

function sameDefinition(a: FieldDefinition, b: FieldDefinition): boolean {
  return (
    a.type === b.type &&
    a.required === b.required &&
    JSON.stringify(a.options ?? null) === JSON.stringify(b.options ?? null)
  );
}

/** Applies a PATCH to a pipeline: adds stages/statuses/fields, renames by id; existing fields never change type. */
export function applyPipelineUpdate(current: PipelineDoc, body: z.infer<typeof updatePipelineBody>): PipelineDoc {
  const problems: FieldProblem[] = [];
  const stages = current.stages.map((stage) => ({ ...stage }));
  body.stages?.forEach((entry, index) => {
    if (entry.stage_id === undefined) {
      stages.push({ stage_id: newId('stage'), name: entry.name, position: stages.length });
      return;
    }
    const stage = stages.find((candidate) => candidate.stage_id === entry.stage_id);
    if (stage) stage.name = entry.name;
    else problems.push({ path: `stages.${index}.stage_id`, message: 'is not a stage of this pipeline' });
  });
  const statuses = current.statuses.map((status) => ({ ...status }));
  body.statuses?.forEach((entry, index) => {
    if (entry.status_id === undefined) {
      statuses.push({ status_id: newId('status'), name: entry.name });
      return;
    }
    const status = statuses.find((candidate) => candidate.status_id === entry.status_id);
    if (status) status.name = entry.name;
    else problems.push({ path: `statuses.${index}.status_id`, message: 'is not a status of this pipeline' });
  });
  const fields = [...current.fields];
  body.fields?.forEach((field, index) => {
    const existing = fields.find((candidate) => candidate.name === field.name);
    if (!existing) fields.push(field);
    else if (!sameDefinition(existing, field)) {
      problems.push({ path: `fields.${index}.name`, message: 'is already defined with another definition' });
    }
  });
  if (stages.length > 100) problems.push({ path: 'stages', message: 'a pipeline has at most 100 stages' });
  if (statuses.length > 100) problems.push({ path: 'statuses', message: 'a pipeline has at most 100 statuses' });
  if (fields.length > 100) problems.push({ path: 'fields', message: 'a pipeline has at most 100 fields' });
  const duplicateDetection = body.duplicate_detection ?? current.duplicate_detection;
  checkDuplicateDetection(duplicateDetection, fields, problems);
  ValidationError.throwIfAny(problems);
  return {
    ...current,
    name: body.name ?? current.name,
    stages,
    statuses,
    fields,
    duplicate_detection: duplicateDetection,
    revision: current.revision + 1,
    updated_at: new Date(),
  };
}

export interface PipelinesServiceDeps {
  pipelines: Pick<PipelinesRepository, 'findById' | 'findCached' | 'insert' | 'list' | 'replaceIfRevision'> & {
    /** A page's rows, read only as far as the page needs (the repository's driver cursor). */
    listCursor(companyId: string, afterId: string | undefined, limit: number): Rows<PipelineDoc>;
  };
}

/** Pipelines for the admin API (create, edit) and the external API (read); routes call only this. */
export class PipelinesService {
  constructor(private readonly deps: PipelinesServiceDeps) {}

  async create(companyId: string, body: z.infer<typeof createPipelineBody>): Promise<PipelineDoc> {
    const duplicateDetection = body.duplicate_detection ?? DEFAULT_DUPLICATE_DETECTION;
    const problems: FieldProblem[] = [];
    checkFieldNamesUnique(body.fields, problems);
    checkDuplicateDetection(duplicateDetection, body.fields, problems);
    ValidationError.throwIfAny(problems);
    const now = new Date();
    return this.deps.pipelines.insert({
      _id: newId('pipeline'),
      company_id: companyId,
      name: body.name,
      stages: body.stages.map((stage, position) => ({ stage_id: newId('stage'), name: stage.name, position })),
      statuses: body.statuses.map((status) => ({ status_id: newId('status'), name: status.name })),
      fields: body.fields,
      duplicate_detection: duplicateDetection,
      revision: 1,
      created_at: now,
      updated_at: now,
    });
  }

  async update(companyId: string, pipelineId: string, body: z.infer<typeof updatePipelineBody>): Promise<PipelineDoc> {
    // Admin edits are rare, so a few attempts cover the contention.
    return retryLostRaces('pipeline', 5, async () => {
      const current = await this.deps.pipelines.findById(companyId, pipelineId);
      if (!current) throw new NotFoundError('Pipeline');
      return this.deps.pipelines.replaceIfRevision(companyId, current.revision, applyPipelineUpdate(current, body));
    });
  }

  /** A page in creation order (the external API), or every pipeline of the company (the admin API). */
  list(companyId: string, afterId?: string, limit?: number): Promise<PipelineDoc[]> {
    return this.deps.pipelines.list(companyId, afterId, limit);
  }

  /** A page's rows as a cursor (the external API reads it up to its byte budget). */
  listCursor(companyId: string, afterId: string | undefined, limit: number): Rows<PipelineDoc> {
    return this.deps.pipelines.listCursor(companyId, afterId, limit);
  }

  /** From the process cache (the external API: changes arrive over the change feed). */
  async getCached(companyId: string, pipelineId: string): Promise<PipelineDoc> {
    const pipeline = await this.deps.pipelines.findCached(companyId, pipelineId);
    if (!pipeline) throw new NotFoundError('Pipeline');
    return pipeline;
  }

  /** Read from MongoDB (the admin API: an edit is seen at once). */
  async get(companyId: string, pipelineId: string): Promise<PipelineDoc> {
    const pipeline = await this.deps.pipelines.findById(companyId, pipelineId);
    if (!pipeline) throw new NotFoundError('Pipeline');
    return pipeline;
  }
}
