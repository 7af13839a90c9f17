import ipaddr from 'ipaddr.js';
import cron from 'node-cron';
import { z } from 'zod';
import { isClusterUrl, parseClusterUrl, queuePrefixFor } from './redis.js';

export const WORKER_ROLES = ['automations', 'hooks', 'overdue', 'relay', 'erasures'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];

const booleanFromEnv = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1');

const positiveInt = z.coerce.number().int().positive();

/**
 * TRUST_PROXY: how many proxies in front of the web process append to `X-Forwarded-For` (the client
 * address is taken that many hops from the right, never the leftmost value a client can write), or
 * the addresses/CIDRs of those proxies. `true` is kept as 1 hop (one load balancer); `false`/`0`: none.
 */
const trustProxyFromEnv = z
  .string()
  .trim()
  .transform((value, ctx): false | number | string[] => {
    if (value === 'false' || value === '0') return false;
    if (value === 'true') return 1;
    if (/^\d{1,2}$/.test(value)) return Number(value);
    const proxies = value.split(',').map((entry) => entry.trim());
    const invalid = proxies.find((entry) => !isAddressOrCidr(entry));
    if (invalid === undefined) return proxies;
    ctx.addIssue({
      code: 'custom',
      message: `expected a number of proxy hops or a comma-separated list of proxy addresses/CIDRs, got '${invalid}'`,
    });
    return z.NEVER;
  });

function isAddressOrCidr(entry: string): boolean {
  if (ipaddr.isValid(entry)) return true;
  try {
    ipaddr.parseCIDR(entry);
    return true;
  } catch {
    return false;
  }
}

/** Every environment variable the processes read (DECISIONS.md section 11), parsed once at start. */
const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  MONGO_URL: z
    .string()
    .regex(/^mongodb(\+srv)?:\/\//, 'expected a mongodb:// or mongodb+srv:// URL')
    .optional(),
  MONGO_DB: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,63}$/, 'expected a database name of letters, digits, _ and -')
    .default('pipeline_records'),
  /** mongodb_commands_total on /metrics: every command sent, by name and collection (costs a little CPU per command). */
  MONGO_COMMAND_METRICS: booleanFromEnv.default(false),
  REDIS_URL: z
    .string()
    .regex(/^rediss?(\+cluster)?:\/\//, 'expected a redis://, rediss:// or redis+cluster://host:port,host:port URL')
    .refine((url) => {
      if (!isClusterUrl(url)) return true;
      try {
        return parseClusterUrl(url).nodes.length > 0;
      } catch {
        return false;
      }
    }, 'expected redis+cluster://host:port,host:port,...')
    .default('redis://127.0.0.1:6379'),
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_:{}-]{1,64}$/, 'expected letters, digits, _, :, - and a {hash tag}')
    .default('prs'),
  ADMIN_TOKEN: z.string().min(1).optional(),
  /** Behind load balancers: where the client address comes from (for the failed-auth throttle); see above. */
  TRUST_PROXY: trustProxyFromEnv.default(false),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  RATE_LIMIT_MAX: positiveInt.default(60),
  RATE_LIMIT_WINDOW_SECONDS: positiveInt.default(60),
  OVERDUE_SCAN_CRON: z
    .string()
    .refine((expr) => cron.validate(expr), 'expected a 5- or 6-field cron expression')
    .default('* * * * *'),
  /** Attempts per delivery, the first included; a retry schedule's length caps it too. */
  HOOK_MAX_ATTEMPTS: positiveInt.max(50).default(8),
  /** When set, retries double from this delay (section 9; development and tests) instead of following the schedule. */
  HOOK_BACKOFF_MS: positiveInt.optional(),
  /** The delays between attempts, in ms (DECISIONS.md section 12.2); unset: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
  HOOK_RETRY_SCHEDULE: z
    .string()
    .regex(/^\s*\d+\s*(,\s*\d+\s*)*$/, 'expected comma-separated delays in milliseconds')
    .transform((list) => list.split(',').map((delay) => Number(delay.trim())))
    .pipe(
      z
        .array(
          z
            .number()
            .int()
            .positive()
            .max(7 * 24 * 3_600_000),
        )
        .min(1)
        .max(49),
    )
    .optional(),
  HOOK_TIMEOUT_MS: positiveInt.default(10_000),
  /** Deliveries to one hook in flight at once, per worker process (DECISIONS.md section 12.2, fairness). */
  HOOK_MAX_IN_FLIGHT_PER_HOOK: positiveInt.max(100).default(4),
  /** Webhooks a worker process sends at once: they mostly wait on receivers, so well above the CPU count. */
  HOOK_CONCURRENCY: positiveInt.max(1_000).default(50),
  HOOK_ALLOW_PRIVATE_TARGETS: booleanFromEnv.default(false),
  /** Hooks a company may have, enabled or not (DECISIONS.md section 12.2). */
  HOOK_MAX_PER_COMPANY: positiveInt.max(10_000).default(25),
  WORKERS: z
    .string()
    .transform((list) =>
      list
        .split(',')
        .map((role) => role.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.enum(WORKER_ROLES)).min(1))
    .default([...WORKER_ROLES]),
  /** Events stay readable (GET /v1/ext/events) and reconcilable this long after they occurred. */
  EVENTS_RETENTION_DAYS: positiveInt.max(3_650).default(30),
  /** Each item's and task's history (and `as_of` reads) reach back this far, separately from events. */
  HISTORY_RETENTION_DAYS: positiveInt.max(3_650).default(365),
  /** How often the relay checks whether Redis lost work MongoDB says is unfinished (DECISIONS.md 12.1). */
  RECONCILE_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /** The event sequencer's lease (DECISIONS.md 13.1): how soon another process takes over from one that died. */
  SEQUENCER_LEASE_MS: z.coerce.number().int().min(500).max(600_000).default(5_000),
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** `npm run dev` only: where the admin token and demo key are kept between restarts, and pinned ports. */
  DEV_STATE_DIR: z.string().min(1).default('.dev'),
  DEV_MONGO_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  DEV_REDIS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
  /** How long a process keeps retrying an unreachable MongoDB (and, for workers, Redis) at start before it exits. */
  STARTUP_TIMEOUT_MS: z.coerce.number().int().min(0).default(60_000),
  /** Without METRICS_PORT, the web process's /metrics on the API port requires this bearer token when set. */
  METRICS_TOKEN: z.string().min(16, 'expected at least 16 characters').optional(),
  /** Server timeouts (DECISIONS.md section 12.4): a whole request, its headers, an idle keep-alive connection. */
  REQUEST_TIMEOUT_MS: positiveInt.default(30_000),
  HEADERS_TIMEOUT_MS: positiveInt.default(10_000),
  KEEP_ALIVE_TIMEOUT_MS: positiveInt.default(5_000),
  /** How long a worker owns a job before another may take it over (BullMQ lockDuration); stalled jobs recover after about this long. */
  JOB_LOCK_MS: z.coerce.number().int().min(1_000).default(30_000),
  /**
   * Tracing (src/telemetry): the --import preload starts OpenTelemetry when either is set, before this
   * schema is read; checked here so that a malformed URL stops the process with one line rather than
   * every export failing silently. The SDK reads them (and the other OTEL_* variables) itself.
   */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .optional(),
});

export type Config = z.infer<typeof envSchema>;

/** The shortest ADMIN_TOKEN a production process starts with. */
export const MIN_PRODUCTION_ADMIN_TOKEN = 32;

export class ConfigError extends Error {}

/** Parses the environment; the message names the first offending variable in one line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings mean "unset", as in most .env tooling.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = String(issue?.path[0] ?? 'environment');
    throw new ConfigError(`Invalid configuration: ${variable}: ${issue?.message ?? 'invalid'}`);
  }
  if (parsed.data.HEADERS_TIMEOUT_MS > parsed.data.REQUEST_TIMEOUT_MS) {
    throw new ConfigError('Invalid configuration: HEADERS_TIMEOUT_MS: must not exceed REQUEST_TIMEOUT_MS');
  }
  if (parsed.data.HOOK_BACKOFF_MS !== undefined && parsed.data.HOOK_RETRY_SCHEDULE !== undefined) {
    throw new ConfigError('Invalid configuration: HOOK_RETRY_SCHEDULE: set it or HOOK_BACKOFF_MS, not both');
  }
  if (parsed.data.NODE_ENV === 'production' && !parsed.data.ADMIN_TOKEN) {
    throw new ConfigError('Invalid configuration: ADMIN_TOKEN: required when NODE_ENV=production');
  }
  // The admin token opens every company (DECISIONS.md 13.4): in production too long to guess, judged at
  // start as METRICS_TOKEN's length is.
  if (parsed.data.NODE_ENV === 'production' && (parsed.data.ADMIN_TOKEN ?? '').length < MIN_PRODUCTION_ADMIN_TOKEN) {
    throw new ConfigError(
      `Invalid configuration: ADMIN_TOKEN: expected at least ${MIN_PRODUCTION_ADMIN_TOKEN} characters when NODE_ENV=production`,
    );
  }
  // On a Redis Cluster every queue key must carry a hash tag (see queuePrefixFor).
  return { ...parsed.data, QUEUE_PREFIX: queuePrefixFor(parsed.data.REDIS_URL, parsed.data.QUEUE_PREFIX) };
}

/** For entry points: one clear line on stderr and exit 1 instead of a stack trace. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
