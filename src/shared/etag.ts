import { hash } from 'node:crypto';

/** An item's ETag is its version (DECISIONS.md section 6). */
export const versionEtag = (version: number) => `"${version}"`;

/** A task has no version in its API shape: its ETag is a digest of the representation, which changes with every visible change. */
export const representationEtag = (representation: unknown) =>
  `"${hash('sha256', JSON.stringify(representation), 'base64url').slice(0, 22)}"`;

/**
 * Whether an `If-Match` header admits the current ETag: `*`, or a list of entity tags one of which
 * equals it (weak `W/` prefixes compare by their tag, as RFC 9110's weak comparison does).
 */
export function ifMatchAccepts(header: string, currentEtag: string): boolean {
  if (header.trim() === '*') return true; // any current representation
  return header
    .split(',')
    .map((tag) => tag.trim().replace(/^W\//, ''))
    .some((tag) => tag === currentEtag);
}
