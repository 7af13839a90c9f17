import { z } from 'zod';

// A calendar date; and a date plus time with an explicit offset or Z (seconds and fractions optional).
const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):?(\d{2}))$/;

/** A real day of the calendar: 2026-02-30 matches the pattern but is not one, and must not roll over to March. */
function isCalendarDay(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
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
    Number(hour) <= 23 && Number(minute) <= 59 && Number(second) <= 59 &&
    Number(offsetHours) <= 23 && Number(offsetMinutes) <= 59
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
