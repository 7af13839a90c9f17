import { z } from 'zod';

// A calendar date; and a date plus time with an explicit offset or Z (seconds and fractions optional).
const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):?(\d{2}))$/;

/** A real day of the calendar: 2026-02-30 matches the pattern but is not one, and must not roll over to March. */
function isCalendarDay(year: number, month: number, day: number): boolean {
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // unlike Date.UTC, years 0-99 stay themselves
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/**
 * The instants whose UTC rendering stays within ISO 8601's four-digit years (0000-01-01 to 9999-12-31).
 * `9999-12-31T23:30:00-01:00` is a valid input whose UTC instant would render as `+010000-…`, which
 * no client can read back; such inputs are refused, so every timestamp we render is a valid input.
 */
const FIRST_RENDERABLE_MS = Date.parse('0000-01-01T00:00:00.000Z');
const LAST_RENDERABLE_MS = Date.parse('9999-12-31T23:59:59.999Z');

export function isRenderableInstant(ms: number): boolean {
  return ms >= FIRST_RENDERABLE_MS && ms <= LAST_RENDERABLE_MS;
}

export function isIsoDate(value: string): boolean {
  const match = ISO_DATE.exec(value);
  return match !== null && isCalendarDay(Number(match[1]), Number(match[2]), Number(match[3]));
}

export function isIsoTimestamp(value: string): boolean {
  const match = ISO_TIMESTAMP.exec(value);
  if (!match) return false;
  const [, year, month, day, hour, minute, second = '0', offsetHours = '0', offsetMinutes = '0'] = match;
  return (
    isCalendarDay(Number(year), Number(month), Number(day)) &&
    Number(hour) <= 23 &&
    Number(minute) <= 59 &&
    Number(second) <= 59 &&
    Number(offsetHours) <= 23 &&
    Number(offsetMinutes) <= 59 &&
    isRenderableInstant(Date.parse(value))
  );
}

/** Input timestamps: ISO 8601 with any offset (DECISIONS.md section 1). */
export const isoTimestampInput = z
  .string()
  .refine(isIsoTimestamp, 'expected ISO 8601 timestamp')
  .transform((value) => new Date(value));

/** Outputs: UTC with milliseconds and Z (`2026-11-22T09:30:00.000Z`). */
export function toIso(date: Date): string;
export function toIso(date: Date | null | undefined): string | null;
export function toIso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}

/**
 * Timestamps in query filters (`created_after=...`): also a calendar date, meaning its start in UTC, and
 * an offset whose `+` arrived as a space because the caller did not percent-encode it.
 */
export const isoTimestampQuery = z
  .string()
  .transform((value) => value.replace(/ (\d{2}:?\d{2})$/, '+$1'))
  .refine((value) => isIsoTimestamp(value) || isIsoDate(value), 'expected ISO 8601 timestamp or date')
  .transform((value) => new Date(isIsoDate(value) ? `${value}T00:00:00Z` : value));

export const isoTimestampOutput = z.string().meta({ format: 'date-time', example: '2026-11-22T09:30:00.000Z' });

/** `promise`, or a rejection once `ms` have passed without it settling (the timer never outlives it). */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
