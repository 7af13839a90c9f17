import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/** Secrets never reach the logs: redaction is configuration, not something to remember per call. */
export const REDACTED_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'headers["x-api-key"]',
  'headers.authorization',
  '*.key',
  '*.secret',
  '*.key_hash',
  '*.token',
  '*.password',
];

export function loggerOptions(level: string, name = 'web'): LoggerOptions {
  return {
    level,
    name,
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
  };
}

/** JSON lines on stdout, or `destination` (`npm run dev` passes pino-pretty when stdout is a terminal). */
export function createLogger(level: string, name = 'web', destination?: DestinationStream): Logger {
  return destination ? pino(loggerOptions(level, name), destination) : pino(loggerOptions(level, name));
}

export type { Logger };
