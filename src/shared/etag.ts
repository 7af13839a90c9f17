import { hash } from 'node:crypto';

/** An item's ETag is its version (DECISIONS.md section 6). */
export const versionEtag = (version: number) => `"${version}"`;

/** A task has no version in its API shape: its ETag is a digest of the representation, which changes with every visible change. */
export const representationEtag = (representation: unknown) =>
  `"${hash('sha256', JSON.stringify(representation), 'base64url').slice(0, 22)}"`;

/**
 * Whether an `If-Match` header admits the current ETag: `*`, or a list of entity tags one of which
 * equals it by strong comparison (RFC 9110 section 13.1.1): a weak tag `W/"3"` never matches, as our
 * ETags are strong and a weak one cannot vouch for the exact representation a write builds on.
 */
export function ifMatchAccepts(header: string, currentEtag: string): boolean {
  if (header.trim() === '*') return true; // any current representation
  return header
    .split(',')
    .map((tag) => tag.trim())
    .some((tag) => tag === currentEtag);
}
