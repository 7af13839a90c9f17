import { MongoBulkWriteError, MongoNetworkError, MongoServerError, type BulkWriteResult } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { duplicateKeyIndexes, isMongoUnavailable } from './mongo.js';

describe('isMongoUnavailable', () => {
  it("takes the driver's network errors and a socket error it let through unwrapped as unavailable", () => {
    expect(isMongoUnavailable(new MongoNetworkError('connection 3 to 127.0.0.1:27017 closed'))).toBe(true);
    const reset = Object.assign(new Error('write ECONNRESET'), { code: 'ECONNRESET', syscall: 'write' });
    expect(isMongoUnavailable(reset)).toBe(true);
    const lostBulk = new MongoBulkWriteError(new MongoNetworkError('read ECONNRESET'), {} as BulkWriteResult);
    expect(isMongoUnavailable(lostBulk)).toBe(true);
  });

  it('leaves server answers and bugs alone', () => {
    expect(isMongoUnavailable(new MongoServerError({ code: 11000, errmsg: 'duplicate key' }))).toBe(false);
    expect(isMongoUnavailable(Object.assign(new Error('ECONNRESET in a message only'), { code: 'ECONNRESET' }))).toBe(
      false,
    );
    expect(isMongoUnavailable(new TypeError('x is undefined'))).toBe(false);
  });
});

describe('duplicateKeyIndexes', () => {
  const result = {} as BulkWriteResult;
  const duplicate = (index: number) => ({ index, code: 11000, errmsg: 'E11000 duplicate key' });

  it('names the statements that failed on a duplicate key, and only when all of them did', () => {
    const error = new MongoBulkWriteError(
      { message: 'E11000', code: 11000, writeErrors: [duplicate(2), duplicate(0)] as never },
      result,
    );
    expect(duplicateKeyIndexes(error)).toEqual([0, 2]);
    const mixed = new MongoBulkWriteError(
      { message: 'E11000', code: 11000, writeErrors: [duplicate(0), { index: 1, code: 121 }] as never },
      result,
    );
    expect(duplicateKeyIndexes(mixed)).toBeUndefined();
  });

  it('takes a bulk write the network failed as a failure, not as duplicates: nothing is known written', () => {
    const lost = new MongoBulkWriteError(new MongoNetworkError('read ECONNRESET'), result);
    expect(duplicateKeyIndexes(lost)).toBeUndefined();
  });
});
