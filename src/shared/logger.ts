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

/**
 * A logger for lines whose fields are fixed and can hold no secret (the request line, a webhook delivery's
 * lines): it skips the redaction pass, in which REDACTED_PATHS' wildcards send every field of every line
 * through the redactor (5 of the 10 µs of a `webhook delivered` line). Everything else keeps redaction.
 */
export function withoutRedaction(logger: Logger): Logger {
  return logger.child({}, { redact: [] });
}

/** How long a log line may wait in the buffer of standard output before it is written. */
export const LOG_FLUSH_INTERVAL_MS = 100;

/**
 * Standard output with lines gathered into writes of 4 KiB, every LOG_FLUSH_INTERVAL_MS and at exit
 * (pino flushes synchronously then) instead of one write per line: under load the write per request
 * line cost about as much CPU as the rest of a cached GET (pino's asynchronous logging guide).
 * A process killed with SIGKILL loses at most the last LOG_FLUSH_INTERVAL_MS of lines.
 * The timer flushes only while something is unwritten: sonic-boom's flush() writes even with nothing
 * buffered (an empty write through libuv's thread pool), ten a second in every quiet process.
 */
function bufferedStdout(): DestinationStream {
  const stdout = pino.destination({ dest: 1, minLength: 4096, sync: false });
  const timer = setInterval(() => {
    if (unwrittenBytes(stdout) > 0) stdout.flush();
  }, LOG_FLUSH_INTERVAL_MS).unref();
  stdout.on('close', () => clearInterval(timer));
  return stdout;
}

/**
 * Bytes a sonic-boom stream holds that are not written yet, buffered or being written (its `_len`, in
 * every 4.x version). Should a version not have it, 1: flushed every time, as sonic-boom's own timer would.
 */
function unwrittenBytes(stream: object): number {
  return (stream as { _len?: number })._len ?? 1;
}

/** JSON lines on stdout, or `destination` (`npm run dev` passes pino-pretty when stdout is a terminal). */
export function createLogger(level: string, name = 'web', destination?: DestinationStream): Logger {
  return pino(loggerOptions(level, name), destination ?? bufferedStdout());
}

export type { Logger };
