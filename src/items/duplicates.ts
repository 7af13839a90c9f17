import { createHash } from 'node:crypto';
import { customValueOf, type CustomValues } from '../contracts/custom-fields.js';
import type { PipelineDoc } from '../contracts/pipelines.js';

/** The text of a comparable custom value (text, number, boolean, list); nothing for anything else. */
function comparableText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return value.map((entry) => comparableText(entry) ?? '').join(',');
  return undefined;
}

/** Trim, collapse inner whitespace; lower-case when the comparison is case-insensitive (DECISIONS.md section 6). */
export function normalizeForComparison(value: unknown, caseInsensitive: boolean): string | undefined {
  const text = comparableText(value)?.trim().replace(/\s+/g, ' ');
  if (!text) return undefined;
  return caseInsensitive ? text.toLowerCase() : text;
}

function token(kind: 'ci' | 'cs', field: string, normalized: string): string {
  // Long values are hashed so the multikey index stays small.
  const value =
    normalized.length > 200 ? `#${createHash('sha256').update(normalized).digest('base64url')}` : normalized;
  return `${kind}:${field}:${value}`;
}

const COMPARABLE = new Set(['text', 'email', 'url', 'number', 'select']);

/**
 * Every comparable value of an item, normalised both ways, stored in one indexed array. The index
 * serves any duplicate-detection config (any/all, case-sensitive or not) without a collection scan,
 * and a later config change needs no re-indexing.
 */
export function duplicateTokens(
  pipeline: PipelineDoc,
  values: { name: string; contact_id: string | null; custom: CustomValues },
): string[] {
  const sources: Array<[string, unknown]> = [
    ['name', values.name],
    ['contact_id', values.contact_id],
    ...pipeline.fields
      .filter((field) => COMPARABLE.has(field.type))
      .map((field): [string, unknown] => [field.name, customValueOf(values.custom, field.name)]),
  ];
  const tokens: string[] = [];
  for (const [field, value] of sources) {
    const insensitive = normalizeForComparison(value, true);
    const sensitive = normalizeForComparison(value, false);
    if (insensitive !== undefined) tokens.push(token('ci', field, insensitive));
    if (sensitive !== undefined) tokens.push(token('cs', field, sensitive));
  }
  return tokens;
}

/** The tokens a duplicate-check request looks for, per configured field. */
export function probeTokens(
  pipeline: PipelineDoc,
  probe: { name?: string; contact_id?: string; metadata?: Record<string, unknown> },
): Map<string, string> {
  const config = pipeline.duplicate_detection;
  const kind = config.case_insensitive ? 'ci' : 'cs';
  const byField = new Map<string, string>();
  for (const field of config.fields) {
    const raw =
      field === 'name' ? probe.name : field === 'contact_id' ? probe.contact_id : customValueOf(probe.metadata, field);
    const normalized = normalizeForComparison(raw, config.case_insensitive);
    if (normalized !== undefined) byField.set(field, token(kind, field, normalized));
  }
  return byField;
}
