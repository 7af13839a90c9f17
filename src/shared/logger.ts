import { pino, type Logger, type LoggerOptions } from 'pino';

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

export function createLogger(level: string, name = 'web'): Logger {
  return pino(loggerOptions(level, name));
}

export type { Logger };
