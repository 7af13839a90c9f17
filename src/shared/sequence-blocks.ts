import { LRUCache } from 'lru-cache';
import { nextSequence } from './counters.js';
import type { Db } from 'mongodb';

/** Numbers taken from a counter at once: one counter write per this many creates. */
export const SEQUENCE_BLOCK_SIZE = 20;
/** Counters with a block held in memory (one per company creating items); the rest start a new block. */
const MAX_HELD_BLOCKS = 10_000;

interface Block {
  next: number;
  last: number;
}

/**
 * Hands out numbers of per-name sequences from blocks reserved in MongoDB (one atomic $inc of
 * `blockSize` per block), so most numbers cost no round trip. Unique across processes, because each
 * block is reserved by one atomic write; never reused, because a counter only ever grows. A process
 * that stops (or forgets a block to stay within MAX_HELD_BLOCKS) leaves the rest of its block unused:
 * the sequence has gaps, and numbers from different processes interleave out of creation order.
 */
export class SequenceBlocks {
  private readonly blocks = new LRUCache<string, Block>({ max: MAX_HELD_BLOCKS });
  /** A reservation under way per name: concurrent callers wait for it instead of reserving their own. */
  private readonly reserving = new Map<string, Promise<void>>();

  constructor(
    private readonly db: Db,
    private readonly blockSize = SEQUENCE_BLOCK_SIZE,
  ) {}

  async next(name: string): Promise<number> {
    for (;;) {
      const block = this.blocks.get(name);
      if (block && block.next <= block.last) return block.next++;
      let reservation = this.reserving.get(name);
      if (!reservation) {
        reservation = this.reserve(name).finally(() => this.reserving.delete(name));
        this.reserving.set(name, reservation);
      }
      await reservation;
    }
  }

  private async reserve(name: string): Promise<void> {
    const last = await nextSequence(this.db, name, this.blockSize);
    this.blocks.set(name, { next: last - this.blockSize + 1, last });
  }
}
