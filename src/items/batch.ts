import { batchOperationSchemas, type batchBody, type ItemResponse } from '../contracts/items.js';
import { problemFromError, type Problem } from '../http/problem.js';
import { AppError, ValidationError } from '../shared/errors.js';
import { PAGE_BUDGET_BYTES } from '../shared/pagination.js';
import { problemsFromZodIssues } from '../shared/zod-problems.js';
import type { Actor } from '../contracts/auth-context.js';
import type { ItemsService } from './service.js';
import type { z } from 'zod';

export interface BatchResult {
  status: number;
  item?: ItemResponse;
  error?: Problem;
  /** Instead of `item` once the answer's items reached BATCH_ITEMS_BUDGET_BYTES: read the item by id. */
  truncated?: true;
  item_id?: string;
  version?: number;
}

/**
 * The items of one batch answer weigh at most this, as JSON (DECISIONS.md section 13.4): the results
 * carry their item while the items so far fit, and always the first; from the first that does not
 * fit on, a result carries `item_id`, `version` and `truncated: true` instead. The same budget as a page.
 */
export const BATCH_ITEMS_BUDGET_BYTES = PAGE_BUDGET_BYTES;

/** Bounds the answer: see BATCH_ITEMS_BUDGET_BYTES. Counts each item's JSON, written once more here. */
export function boundBatchResults(results: BatchResult[], budget = BATCH_ITEMS_BUDGET_BYTES): BatchResult[] {
  let bytes = 0;
  let full = false;
  return results.map((result) => {
    const { item } = result;
    if (!item) return result;
    if (!full) {
      const size = Buffer.byteLength(JSON.stringify(item));
      full = bytes > 0 && bytes + size > budget;
      bytes += size;
      if (!full) return result;
    }
    return { status: result.status, item_id: item.item_id, version: item.version, truncated: true };
  });
}

type Operation = z.infer<typeof batchBody>['operations'][number];

/**
 * POST /items/batch (DECISIONS.md section 12.3): operations run in order, each on its own (no
 * transaction) with its own events; a failed one is a result, never the whole request's answer.
 * Consecutive creates go to the database together (one short_id block, one unordered insert).
 */
export async function runBatch(
  items: ItemsService,
  actor: Actor,
  operations: Operation[],
  requestId: string,
): Promise<BatchResult[]> {
  const failure = (error: unknown): BatchResult => {
    if (!(error instanceof AppError)) throw error;
    return { status: error.status, error: problemFromError(error, requestId) };
  };
  const results: BatchResult[] = [];
  let index = 0;
  for (let operation = operations[index]; operation; operation = operations[index]) {
    if (operation.op === 'create') {
      let end = index;
      while (operations[end]?.op === 'create') end++;
      results.push(...(await runCreates(items, actor, operations.slice(index, end), failure)));
      index = end;
      continue;
    }
    results.push(await runOne(items, actor, operation).catch(failure));
    index++;
  }
  return boundBatchResults(results);
}

function invalid(issues: z.core.$ZodIssue[]): ValidationError {
  return new ValidationError(problemsFromZodIssues(issues));
}

async function runCreates(
  items: ItemsService,
  actor: Actor,
  operations: Operation[],
  failure: (error: unknown) => BatchResult,
): Promise<BatchResult[]> {
  const parsed = operations.map((operation) => batchOperationSchemas.create.safeParse(operation));
  const bodies = parsed.flatMap((result) => (result.success ? [(({ op: _op, ...body }) => body)(result.data)] : []));
  const created = await items.createMany(actor, bodies);
  let next = 0;
  return parsed.map((result) => {
    if (!result.success) return failure(invalid(result.error.issues));
    const outcome = created[next++];
    return outcome instanceof AppError ? failure(outcome) : { status: 201, item: outcome };
  });
}

async function runOne(items: ItemsService, actor: Actor, operation: Operation): Promise<BatchResult> {
  if (operation.op === 'update') {
    const parsed = batchOperationSchemas.update.safeParse(operation);
    if (!parsed.success) throw invalid(parsed.error.issues);
    const { op: _op, item_id: itemId, ...body } = parsed.data;
    return { status: 200, item: await items.update(actor, itemId, body) };
  }
  const parsed = batchOperationSchemas.upsert.safeParse(operation);
  if (!parsed.success) throw invalid(parsed.error.issues);
  const { op: _op, external_id: externalId, ...body } = parsed.data;
  const { item, created } = await items.upsert(actor, externalId, body);
  return { status: created ? 201 : 200, item };
}
