import { z } from 'zod';
import { isoTimestampOutput, toIso } from '../shared/time.js';
import type { ErasureDoc } from './repository.js';

export const createErasureBody = z
  .union([
    z.strictObject({ item_id: z.string().min(1).max(100) }),
    z.strictObject({ task_id: z.string().min(1).max(100) }),
  ])
  .describe('The record to erase: `{ "item_id" }` or `{ "task_id" }`')
  .meta({ example: { item_id: 'itm_6740b7a1c2d3e4f5a6b7c8d9' } });

export const erasureSchema = z
  .object({
    erasure_id: z.string(),
    status: z.enum(['queued', 'running', 'completed']),
    item_id: z.string().nullable(),
    task_id: z.string().nullable(),
    requested_at: isoTimestampOutput,
    completed_at: isoTimestampOutput.nullable(),
  })
  .meta({
    id: 'Erasure',
    description: 'An erasure of one record and where it stands',
    example: {
      erasure_id: 'era_6740b7a1c2d3e4f5a6b7c8d9',
      status: 'queued',
      item_id: 'itm_6740b7a1c2d3e4f5a6b7c8d9',
      task_id: null,
      requested_at: '2026-12-07T09:30:00.000Z',
      completed_at: null,
    },
  });

export type ErasureResponse = z.infer<typeof erasureSchema>;

export function toErasureResponse(doc: ErasureDoc): ErasureResponse {
  return {
    erasure_id: doc._id,
    status: doc.status,
    item_id: doc.kind === 'item' ? doc.record_id : null,
    task_id: doc.kind === 'task' ? doc.record_id : null,
    requested_at: toIso(doc.requested_at),
    completed_at: toIso(doc.completed_at),
  };
}
