/**
 * lru-cache options for a cache whose entries expire (`ttl`): the clock is read on every lookup instead
 * of being kept for a millisecond. lru-cache's default (`ttlResolution: 1`) keeps it with a setTimeout
 * per millisecond per cache, and under load that is about a timer per request for each such cache a
 * request reads (the API keys', the announced records', the existence checks'): made, inserted, fired and
 * collected. A `performance.now()` per lookup costs less, and expiry is exact.
 */
export const EXACT_TTL = { ttlResolution: 0 } as const;
