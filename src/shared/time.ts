import { z } from 'zod';

/** Input timestamps: ISO 8601 with any offset (DECISIONS.md section 1). */
export const isoTimestampInput = z
  .string()
  .refine((value) => ISO_8601.test(value) && !Number.isNaN(Date.parse(value)), 'expected ISO 8601 timestamp')
  .transform((value) => new Date(value));

// Date plus time with seconds and an explicit offset or Z; fractional seconds optional.
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;

/** Outputs: UTC with milliseconds and Z (`2026-11-22T09:30:00.000Z`). */
export function toIso(date: Date): string;
export function toIso(date: Date | null | undefined): string | null;
export function toIso(date: Date | null | undefined): string | null {
  return date ? date.toISOString() : null;
}

export const isoTimestampOutput = z.string().meta({ format: 'date-time', example: '2026-11-22T09:30:00.000Z' });
