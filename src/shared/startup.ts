import { setTimeout as sleep } from 'node:timers/promises';
import { countMongoCommands } from './mongo-commands.js';
import { connectMongo, type MongoConnection } from './mongo.js';
import type { Logger } from './logger.js';

/** A start that cannot succeed: the entry point prints its message as one line and exits non-zero. */
export class StartupError extends Error {}

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 5_000;
/** The first attempt gets 2 s, each next one a second more, up to this (and never beyond the deadline). */
const MAX_ATTEMPT_MS = 5_000;

/** The first line of an error's message, short: what an operator needs, never a driver's stack. */
export function reasonOf(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | undefined)?.code;
  const line = (message.split('\n')[0] ?? '').slice(0, 200) || (typeof code === 'string' ? code : 'unknown error');
  return line;
}

/**
 * Tries `connect` until it succeeds or `deadline` (epoch ms) passes, with doubling pauses in between
 * and one log line per failed attempt; then throws a StartupError naming the dependency and the last reason.
 * `connect` gets the time it may take for this attempt.
 */
export async function untilReachable<T>(
  dependency: string,
  connect: (attemptMs: number) => Promise<T>,
  options: { deadline: number; logger: Logger },
): Promise<T> {
  const started = Date.now();
  let pause = FIRST_RETRY_MS;
  for (let attempt = 1; ; attempt++) {
    const attemptMs = Math.max(250, Math.min(MAX_ATTEMPT_MS, 1_000 + 1_000 * attempt, options.deadline - Date.now()));
    try {
      const connected = await connect(attemptMs);
      if (attempt > 1) options.logger.info({ dependency, attempt }, `${dependency} reachable`);
      return connected;
    } catch (error) {
      const reason = reasonOf(error);
      const left = options.deadline - Date.now();
      if (left <= 0) {
        const seconds = Math.round((Date.now() - started) / 1000);
        throw new StartupError(
          `${dependency} unreachable: gave up after ${attempt} attempts in ${seconds} s (STARTUP_TIMEOUT_MS): ${reason}`,
        );
      }
      const retryIn = Math.min(pause, left);
      options.logger.warn(
        { dependency, attempt, retry_in_ms: retryIn, reason },
        `${dependency} unreachable at start; retrying`,
      );
      await sleep(retryIn);
      pause = Math.min(pause * 2, MAX_RETRY_MS);
    }
  }
}

/**
 * MongoDB for an entry point (web and worker alike): retried until `deadline`; with `countCommands`
 * (MONGO_COMMAND_METRICS) its commands are counted as mongodb_commands_total.
 */
export async function reachMongo(
  target: { url: string; dbName: string; countCommands: boolean },
  options: { deadline: number; logger: Logger },
): Promise<MongoConnection> {
  const mongo = await untilReachable(
    'MongoDB',
    (attemptMs) => connectMongo(target.url, target.dbName, attemptMs, { monitorCommands: target.countCommands }),
    options,
  );
  if (target.countCommands) countMongoCommands(mongo.client);
  return mongo;
}

/** A listen() failure as one clear line (the port variable named), anything else unchanged. */
export function listenError(variable: string, port: number, error: unknown): unknown {
  const code = (error as { code?: string } | undefined)?.code;
  if (code === 'EADDRINUSE') return new StartupError(`${variable} ${port} is already in use (EADDRINUSE)`);
  if (code === 'EACCES') return new StartupError(`${variable} ${port} may not be bound by this user (EACCES)`);
  return error;
}

/**
 * For entry points: a StartupError becomes one fatal log line and exit 1; anything else (a bug) is
 * logged with its stack, and also exits 1.
 */
export function exitOnStartupFailure(logger: Logger, error: unknown): never {
  if (error instanceof StartupError) logger.fatal(`cannot start: ${error.message}`);
  else logger.fatal({ err: error }, 'cannot start');
  process.exit(1);
}
