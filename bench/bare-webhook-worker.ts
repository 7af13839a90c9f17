// The baseline of the webhook scenario: a bare BullMQ worker that POSTs each job's event to the
// receiver with undici, and nothing else (no fan-out step, no hook lookup, no signing, no delivery
// records). Same concurrency and keep-alive agent settings as the hooks role.
// Env: REDIS_URL, QUEUE_PREFIX, QUEUE_NAME, CONCURRENCY, TARGET_URL. Prints `ready` once it consumes.
import { Worker } from 'bullmq';
import { Agent, request } from 'undici';
import { webhookBody } from '../src/hooks/signing.js';
import { createWorkerRedis } from '../src/shared/redis.js';
import type { EventEnvelope } from '../src/contracts/envelope.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`bare-webhook-worker: ${name} is required`);
  return value;
};

const target = env('TARGET_URL');
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 32 });
const connection = createWorkerRedis(env('REDIS_URL'));

const worker = new Worker<EventEnvelope>(
  env('QUEUE_NAME'),
  async (job) => {
    const response = await request(target, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: webhookBody(job.data),
    });
    await response.body.dump();
    if (response.statusCode >= 300) throw new Error(`receiver answered ${response.statusCode}`);
  },
  { connection, prefix: env('QUEUE_PREFIX'), concurrency: Number(env('CONCURRENCY')) },
);
worker.on('error', (error) => process.stderr.write(`bare worker: ${error.message}\n`));
await worker.waitUntilReady();
process.stdout.write('ready\n');

const stop = async () => {
  await worker.close();
  await agent.close();
  connection.disconnect();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
