import type { FieldProblem } from '../shared/errors.js';

/**
 * Far above any valid body (a pipeline has at most 100 fields, a multi_select at most 200 values),
 * far below what 1 MiB can hold (about 100,000 members). Building and judging an object of 100,000
 * keys costs the event loop over a second; refusing it from the text costs a few milliseconds.
 */
export const MAX_JSON_MEMBERS = 1_000;
/** Valid bodies nest a handful of levels; deeper ones only cost recursion further on. */
export const MAX_JSON_DEPTH = 64;
/**
 * Values in the whole body: above the largest valid body (a batch of 100 item operations with their
 * custom fields), so that many containers just under MAX_JSON_MEMBERS cannot add up to 500,000 values.
 */
export const MAX_JSON_VALUES = 50_000;

const QUOTE = 34;
const BACKSLASH = 92;
const COMMA = 44;
const COLON = 58;
const OPEN_OBJECT = 123;
const CLOSE_OBJECT = 125;
const OPEN_ARRAY = 91;
const CLOSE_ARRAY = 93;

/** Whether `text` has fewer than `limit` occurrences of `char` (native search, stops at the limit). */
function fewerThan(text: string, char: string, limit: number): boolean {
  let count = 0;
  for (let at = text.indexOf(char); at !== -1; at = text.indexOf(char, at + 1)) if (++count >= limit) return false;
  return true;
}

/** Index of the quote that closes the string opened at `start`. */
function closingQuote(text: string, start: number): number {
  let at = text.indexOf('"', start + 1);
  while (at !== -1) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
  return text.length;
}

/**
 * The first object or array of a JSON text with more than MAX_JSON_MEMBERS members, or nested deeper
 * than MAX_JSON_DEPTH, as a problem with its path; read from the text before it is parsed. The text
 * is assumed to be JSON: whatever is not is left to the parser, which refuses it.
 */
export function oversizeJsonProblem(text: string): FieldProblem | undefined {
  // Most bodies have too few commas and brackets to hold either; they pass without a scan.
  if (
    fewerThan(text, ',', MAX_JSON_MEMBERS) &&
    fewerThan(text, '{', MAX_JSON_DEPTH) &&
    fewerThan(text, '[', MAX_JSON_DEPTH)
  )
    return undefined;

  // Per open container: whether it is an object, its commas so far, and (objects) where its current key is.
  const isObject: boolean[] = [];
  const commas: number[] = [];
  const keyStart: number[] = [];
  const keyEnd: number[] = [];
  let depth = 0;
  let values = 0;
  let lastString = -1;
  let lastStringEnd = -1;
  const pathTo = (level: number): string => {
    const segments: string[] = [];
    for (let d = 1; d < level; d++) {
      segments.push(isObject[d] ? text.slice((keyStart[d] ?? -1) + 1, keyEnd[d]) : String(commas[d]));
    }
    return segments.join('.');
  };
  for (let at = 0; at < text.length; at++) {
    switch (text.charCodeAt(at)) {
      case QUOTE:
        lastString = at;
        lastStringEnd = at = closingQuote(text, at);
        break;
      case COLON:
        keyStart[depth] = lastString;
        keyEnd[depth] = lastStringEnd;
        break;
      case OPEN_OBJECT:
      case OPEN_ARRAY:
        depth++;
        if (depth > MAX_JSON_DEPTH) {
          return { path: pathTo(depth), message: `is nested deeper than ${MAX_JSON_DEPTH} levels` };
        }
        isObject[depth] = text.charCodeAt(at) === OPEN_OBJECT;
        commas[depth] = 0;
        break;
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        depth--;
        break;
      case COMMA:
        commas[depth] = (commas[depth] ?? 0) + 1;
        if ((commas[depth] ?? 0) >= MAX_JSON_MEMBERS) {
          return { path: pathTo(depth), message: `has more than ${MAX_JSON_MEMBERS} members` };
        }
        if (++values >= MAX_JSON_VALUES) {
          return { path: '', message: `holds more than ${MAX_JSON_VALUES} values in all` };
        }
        break;
    }
  }
  return undefined;
}
