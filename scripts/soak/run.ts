import { formatReport, runSoak } from './soak.js';

// `npm run soak [-- --seconds 120 --companies 20 --concurrency 16 --cluster | --redis-volatile]`
const argument = (name: string, fallback: number) => {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
};
const report = await runSoak({
  durationMs: argument('seconds', 120) * 1000,
  companies: argument('companies', 20),
  concurrency: argument('concurrency', 16),
  cluster: process.argv.includes('--cluster'),
  redisVolatile: process.argv.includes('--redis-volatile'),
  log: (line) => process.stderr.write(`${line}\n`),
});
process.stdout.write(`${formatReport(report)}\n`);
const ok =
  report.serverErrors === 0 &&
  report.eventsDelivered >= report.eventsRecorded &&
  report.queueDepthAfterDrain === 0 &&
  report.unfinishedAfterDrain === 0;
process.exit(ok ? 0 : 1);
