import { ObjectId } from 'mongodb';

/**
 * Opaque, prefixed identifiers (`itm_65f0...`). The ObjectId part makes ids of one kind sort by
 * creation time, which keyset pagination uses to break ties.
 */
export const ID_PREFIXES = {
  company: 'cmp',
  user: 'usr',
  pipeline: 'pip',
  stage: 'stg',
  status: 'sts',
  apiKey: 'key',
  item: 'itm',
  task: 'tsk',
  hook: 'hk',
  automation: 'aut',
  event: 'evt',
  erasure: 'era',
  recovery: 'rcv',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

export function newId(kind: IdKind): string {
  return `${ID_PREFIXES[kind]}_${new ObjectId().toHexString()}`;
}

/** Whether `value` is shaped like an id of this kind (so an over-long or made-up one needs no lookup). */
export function isIdOf(kind: IdKind, value: string): boolean {
  return (
    value.length === ID_PREFIXES[kind].length + 25 &&
    value.startsWith(`${ID_PREFIXES[kind]}_`) &&
    /^[0-9a-f]{24}$/.test(value.slice(-24))
  );
}

/**
 * A cache key for a record of a company: unambiguous because company ids (ours, never the caller's)
 * contain no `/`, so the first one separates them whatever `id` holds. Cheaper than JSON per request.
 */
export function companyScopedKey(companyId: string, id: string): string {
  return `${companyId}/${id}`;
}
