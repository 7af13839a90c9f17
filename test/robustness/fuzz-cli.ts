/**
 * `npm run fuzz`: the long fuzz run over every external and admin route, against a private MongoDB
 * (or MONGO_URL) and Redis, printing one summary line per route. Env: FUZZ_RUNS (cases per route,
 * default 2000), FUZZ_SEED (default: time-based, printed), FUZZ_ROUTE (regex filter on "METHOD /path"),
 * FUZZ_CONCURRENCY (routes fuzzed at once, default 4). Exits 1 when any case broke a property.
 */
import { buildApp } from '../../src/app.js';
import { startEmbeddedMongo } from '../../src/dev/embedded-mongo.js';
import { hasRedisServerBinary, PrivateRedisServer } from '../../src/dev/redis-server.js';
import { ensureIndexes } from '../../src/repositories.js';
import { loadConfig } from '../../src/shared/config.js';
import { connectMongo } from '../../src/shared/mongo.js';
import { createRequestPathRedis } from '../../src/shared/redis.js';
import { TEST_ADMIN_TOKEN, uniqueName } from '../helpers/app.js';
import { foreignSnapshot, fuzzRoute, fuzzTargets, summaryTable, type RouteStats } from './fuzz/runner.js';
import { seedFuzzWorld } from './fuzz/world.js';

const runs = Number(process.env.FUZZ_RUNS ?? 2_000);
const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);
const concurrency = Math.max(1, Number(process.env.FUZZ_CONCURRENCY ?? 4));
const routeFilter = new RegExp(process.env.FUZZ_ROUTE ?? '.');

async function main(): Promise<number> {
  const mongo = await startEmbeddedMongo({ quiet: true });
  const redisServer = !process.env.REDIS_URL && hasRedisServerBinary() ? await PrivateRedisServer.start() : undefined;
  const config = loadConfig({
    NODE_ENV: 'test',
    MONGO_URL: mongo.url,
    MONGO_DB: uniqueName('fuzz'),
    REDIS_URL: redisServer?.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    QUEUE_PREFIX: uniqueName('fuzz'),
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    HOOK_ALLOW_PRIVATE_TARGETS: 'true',
    RATE_LIMIT_MAX: '1000000000',
  });
  const { db, client } = await connectMongo(config.MONGO_URL!, config.MONGO_DB);
  const redis = createRequestPathRedis(config.REDIS_URL);
  redis.on('error', () => {});
  await ensureIndexes(db);
  const app = await buildApp({ config, db, redis });
  await app.ready();
  try {
    process.stdout.write(`fuzz: ${runs} cases per route, seed ${seed}, mongo=${mongo.kind}\n`);
    const started = Date.now();
    const world = await seedFuzzWorld(app);
    const foreignBefore = await foreignSnapshot(db, world.foreign.companyId);
    const targets = fuzzTargets(app).filter((target) => routeFilter.test(`${target.method} ${target.url}`));
    const results: RouteStats[] = [];
    // Deletes come last (see fuzzTargets), so they run in a batch of their own after everything else.
    const batches = [
      targets.filter((target) => target.method !== 'DELETE'),
      targets.filter((target) => target.method === 'DELETE'),
    ];
    for (const batch of batches) {
      for (let index = 0; index < batch.length; index += concurrency) {
        const slice = batch.slice(index, index + concurrency);
        results.push(
          ...(await Promise.all(slice.map((target) => fuzzRoute(app, world, target, { numRuns: runs, seed })))),
        );
        process.stderr.write(`  ${results.length}/${targets.length} routes done\n`);
      }
    }
    const foreignUntouched = (await foreignSnapshot(db, world.foreign.companyId)) === foreignBefore;
    const failures = results.flatMap((entry) => entry.failures);
    process.stdout.write(`\n${summaryTable(results)}\n\n`);
    process.stdout.write(`foreign company untouched: ${foreignUntouched ? 'yes' : 'NO'}\n`);
    process.stdout.write(`duration: ${((Date.now() - started) / 1000).toFixed(1)} s, seed ${seed}\n`);
    for (const failure of failures.slice(0, 20)) {
      process.stdout.write(
        `\nFAIL ${failure.route} case ${failure.caseIndex}: ${failure.problems.join('; ')}\n  request: ${failure.request}\n  ${failure.status} ${failure.body}\n`,
      );
    }
    return failures.length === 0 && foreignUntouched ? 0 : 1;
  } finally {
    await app.close();
    await db.dropDatabase().catch(() => {});
    await client.close();
    redis.disconnect();
    await redisServer?.stop();
    await mongo.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`fuzz run crashed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(2);
  },
);
