import { isDuplicateKeyError } from './mongo.js';
import type { Db } from 'mongodb';

interface CounterDoc {
  _id: string;
  seq: number;
}

/**
 * An atomic per-name sequence ($inc with upsert): concurrent callers never get the same number.
 * With `count`, reserves that many numbers at once and returns the last (the block ends there).
 */
export async function nextSequence(db: Db, name: string, count = 1): Promise<number> {
  const counters = db.collection<CounterDoc>('counters');
  for (let attempt = 0; ; attempt++) {
    try {
      const counter = await counters.findOneAndUpdate(
        { _id: name },
        { $inc: { seq: count } },
        { upsert: true, returnDocument: 'after' },
      );
      if (counter) return counter.seq;
    } catch (error) {
      // Two first-ever upserts can race on the _id; the loser simply increments the winner's counter.
      if (!isDuplicateKeyError(error) || attempt >= 3) throw error;
    }
  }
}
