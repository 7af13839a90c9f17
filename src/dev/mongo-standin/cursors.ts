// Server-side cursors: a snapshot of the remaining results per cursor id,
// served in batches by getMore, expired after 10 idle minutes.

import { randomBytes } from 'node:crypto';
import { BSON, Long } from 'bson';
import { fail } from './errors.js';
import type { Doc } from './values.js';

const IDLE_TIMEOUT_MS = 10 * 60 * 1000;
/** Keeps a batch (plus reply envelope) under the 16 MiB BSON document limit. */
const MAX_BATCH_BYTES = 16 * 1024 * 1024 - 64 * 1024;
const DEFAULT_FIRST_BATCH = 101;

interface CursorState {
  ns: string;
  docs: Doc[];
  pos: number;
  lastUsed: number;
}

export interface CursorReply {
  cursor: { id: Long; ns: string; firstBatch?: Doc[]; nextBatch?: Doc[] };
  ok: 1;
}

export class Cursors {
  private readonly open = new Map<string, CursorState>();

  /** Returns the first batch and registers a cursor if results remain. */
  start(ns: string, docs: Doc[], batchSize?: number, singleBatch = false): CursorReply {
    this.expireIdle();
    const state: CursorState = { ns, docs, pos: 0, lastUsed: Date.now() };
    const batch = takeBatch(state, batchSize ?? DEFAULT_FIRST_BATCH);
    let id = Long.ZERO;
    if (!singleBatch && state.pos < docs.length) {
      id = this.newId();
      this.open.set(id.toString(), state);
    }
    return { cursor: { id, ns, firstBatch: batch }, ok: 1 };
  }

  getMore(rawId: unknown, ns: string, batchSize?: number): CursorReply {
    this.expireIdle();
    const key = String(rawId);
    const state = this.open.get(key);
    if (!state) fail('CursorNotFound', `cursor id ${key} not found`);
    if (state.ns !== ns) {
      fail(
        'Unauthorized',
        `Requested getMore on namespace '${ns}', but cursor belongs to a different namespace ${state.ns}`,
      );
    }
    state.lastUsed = Date.now();
    const batch = takeBatch(state, batchSize && batchSize > 0 ? batchSize : Infinity);
    let id = Long.fromString(key);
    if (state.pos >= state.docs.length) {
      this.open.delete(key);
      id = Long.ZERO;
    }
    return { cursor: { id, ns, nextBatch: batch }, ok: 1 };
  }

  kill(ids: unknown[]): { cursorsKilled: Long[]; cursorsNotFound: Long[] } {
    const killed: Long[] = [];
    const notFound: Long[] = [];
    for (const raw of ids) {
      const key = String(raw);
      (this.open.delete(key) ? killed : notFound).push(Long.fromString(key));
    }
    return { cursorsKilled: killed, cursorsNotFound: notFound };
  }

  get size(): number {
    return this.open.size;
  }

  expireIdle(now = Date.now()): void {
    for (const [id, c] of this.open) if (now - c.lastUsed > IDLE_TIMEOUT_MS) this.open.delete(id);
  }

  clear(): void {
    this.open.clear();
  }

  private newId(): Long {
    // Random positive 63-bit ids like a real server: the driver must echo them back as int64.
    for (;;) {
      const id = Long.fromBigInt(randomBytes(8).readBigUInt64LE() & 0x7fffffffffffffffn);
      if (!id.isZero() && !this.open.has(id.toString())) return id;
    }
  }
}

function takeBatch(state: CursorState, max: number): Doc[] {
  const batch: Doc[] = [];
  let bytes = 0;
  while (batch.length < max) {
    const doc = state.docs[state.pos];
    if (doc === undefined) break;
    bytes += BSON.calculateObjectSize(doc);
    if (batch.length > 0 && bytes > MAX_BATCH_BYTES) break;
    batch.push(doc);
    state.pos++;
  }
  return batch;
}
