import cron from 'node-cron';
import { z } from 'zod';

export const WORKER_ROLES = ['automations', 'hooks', 'overdue', 'relay'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];

const booleanFromEnv = z
  .enum(['true', 'false', '1', '0'])
  .transform((value) => value === 'true' || value === '1');

const positiveInt = z.coerce.number().int().positive();

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
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL')
    .default('redis://127.0.0.1:6379'),
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_:-]{1,64}$/, 'expected letters, digits, _, : and -')
    .default('prs'),
  ADMIN_TOKEN: z.string().min(1).optional(),
  /** Behind a load balancer: take the client address from X-Forwarded-For (for the failed-auth throttle). */
  TRUST_PROXY: booleanFromEnv.default(false),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  RATE_LIMIT_MAX: positiveInt.default(60),
  RATE_LIMIT_WINDOW_SECONDS: positiveInt.default(60),
  OVERDUE_SCAN_CRON: z
    .string()
    .refine((expr) => cron.validate(expr), 'expected a 5- or 6-field cron expression')
    .default('* * * * *'),
  HOOK_MAX_ATTEMPTS: positiveInt.max(50).default(8),
  HOOK_BACKOFF_MS: positiveInt.default(30_000),
  HOOK_TIMEOUT_MS: positiveInt.default(10_000),
  /** Webhooks a worker process sends at once: they mostly wait on receivers, so well above the CPU count. */
  HOOK_CONCURRENCY: positiveInt.max(1_000).default(50),
  HOOK_ALLOW_PRIVATE_TARGETS: booleanFromEnv.default(false),
  WORKERS: z
    .string()
    .transform((list) => list.split(',').map((role) => role.trim()).filter(Boolean))
    .pipe(z.array(z.enum(WORKER_ROLES)).min(1))
    .default([...WORKER_ROLES]),
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** How long a worker owns a job before another may take it over (BullMQ lockDuration); stalled jobs recover after about this long. */
  JOB_LOCK_MS: z.coerce.number().int().min(1_000).default(30_000),
});

export type Config = z.infer<typeof envSchema>;

export class ConfigError extends Error {}

/** Parses the environment; the message names the first offending variable in one line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings mean "unset", as in most .env tooling.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`Invalid configuration: ${variable}: ${issue.message}`);
  }
  if (parsed.data.NODE_ENV === 'production' && !parsed.data.ADMIN_TOKEN) {
    throw new ConfigError('Invalid configuration: ADMIN_TOKEN: required when NODE_ENV=production');
  }
  return parsed.data;
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
