// MongoDB-shaped command errors. Every failure leaves the server as
// `{ ok: 0, errmsg, code, codeName, ...extra }` so the driver builds the same
// MongoServerError it would for a real mongod.

export const CODES = {
  InternalError: 1,
  BadValue: 2,
  Unauthorized: 13,
  FailedToParse: 9,
  TypeMismatch: 14,
  IllegalOperation: 20,
  NamespaceNotFound: 26,
  IndexNotFound: 27,
  PathNotViable: 28,
  DollarPrefixedFieldName: 52,
  CursorNotFound: 43,
  NamespaceExists: 48,
  NoSuchKey: 4,
  CommandNotFound: 59,
  ImmutableField: 66,
  CannotCreateIndex: 67,
  InvalidOptions: 72,
  InvalidNamespace: 73,
  IndexOptionsConflict: 85,
  IndexKeySpecsConflict: 86,
  CannotIndexParallelArrays: 171,
  NotImplemented: 238,
  UnsupportedOpQueryCommand: 352,
  DuplicateKey: 11000,
  BSONObjectTooLarge: 10334,
  Location17419: 17419,
  Location40324: 40324,
  Location40415: 40415,
} as const;

export type CodeName = keyof typeof CODES;

export class CommandError extends Error {
  readonly code: number;
  constructor(
    readonly codeName: CodeName,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.code = CODES[codeName];
  }

  toReply(): Record<string, unknown> {
    return { ok: 0, errmsg: this.message, code: this.code, codeName: this.codeName, ...this.extra };
  }

  /** Entry of a write command's `writeErrors` array. */
  toWriteError(index: number): Record<string, unknown> {
    return { index, code: this.code, errmsg: this.message, ...this.extra };
  }
}

export function fail(codeName: CodeName, message: string, extra?: Record<string, unknown>): never {
  throw new CommandError(codeName, message, extra);
}

/** Features a real server has but this stand-in deliberately does not implement. */
export function notImplemented(what: string): never {
  throw new CommandError('NotImplemented', `mongo-standin does not support ${what}`);
}

export function asCommandError(e: unknown): CommandError {
  if (e instanceof CommandError) return e;
  const msg = e instanceof Error ? e.message : String(e);
  // mingo throws plain errors for bad operators/expressions: report them as BadValue.
  return new CommandError(
    e instanceof Error && e.constructor.name === 'MingoError' ? 'BadValue' : 'InternalError',
    msg,
  );
}

export const TXN_ERROR_MSG = 'Transaction numbers are only allowed on a replica set member or mongos';
