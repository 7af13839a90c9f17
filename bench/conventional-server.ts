// The second baseline of `npm run bench` (--only=conventional): the same routes built the way a user
// would build them from stock parts, not a bare minimum: Fastify with its default logger (info:
// a line per request and per response), @fastify/rate-limit on its Redis store, request and response
// validation with fastify-type-provider-zod (our own zod schemas), an API key checked on every request
// from an in-process map, and the same MongoDB work as ours, done the plain way: a created task's
// event is inserted as a record of its own, then handed to a BullMQ queue, per request. Env: PORT, MONGO_URL, MONGO_DB, REDIS_URL,
// QUEUE_PREFIX.
import rateLimit from '@fastify/rate-limit';
import { Queue } from 'bullmq';
import Fastify, { type FastifyRequest } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { z } from 'zod';
import { hashApiKey } from '../src/auth/key-material.js';
import { itemSchema, toItemResponse } from '../src/contracts/items.js';
import { pipelineSchema } from '../src/contracts/pipelines.js';
import { createTaskBody, taskSchema, toTaskResponse } from '../src/contracts/tasks.js';
import { toPipelineResponse } from '../src/pipelines/repository.js';
import { newId } from '../src/shared/ids.js';
import type { ApiKeyDoc } from '../src/auth/api-keys.repository.js';
import type { ItemDoc } from '../src/contracts/items.js';
import type { PipelineDoc } from '../src/contracts/pipelines.js';
import type { TaskDoc } from '../src/contracts/tasks.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`conventional-server: ${name} is required`);
  return value;
};

const client = await MongoClient.connect(env('MONGO_URL'), { maxPoolSize: 50 });
const db = client.db(env('MONGO_DB'));
const items = db.collection<ItemDoc>('items');
const pipelines = db.collection<PipelineDoc>('pipelines');
const tasks = db.collection<TaskDoc>('tasks');
const apiKeys = db.collection<ApiKeyDoc>('api_keys');
// Its own collection, so our relay and reconciler never see these records.
const eventRecords = db.collection<{ _id: string; company_id: string; event: object; recorded_at: Date }>(
  'conventional_events',
);
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: null });
// Not a queue any worker of ours reads: the jobs only cost what adding them costs.
const events = new Queue('conventional-events', { connection: redis, prefix: `${env('QUEUE_PREFIX')}conv` });

/** Keys and pipelines read once and kept: what a simple service does, and what ours does (with invalidation). */
const keysByHash = new Map<string, ApiKeyDoc | null>();
const pipelinesById = new Map<string, PipelineDoc | null>();

const app = Fastify({ logger: true }).withTypeProvider<ZodTypeProvider>();
app.setValidatorCompiler(validatorCompiler);
app.setSerializerCompiler(serializerCompiler);
await app.register(rateLimit, {
  redis,
  max: 1_000_000_000,
  timeWindow: '1 minute',
  nameSpace: `${env('QUEUE_PREFIX')}:conv-rl:`,
  keyGenerator: (request) => String(request.headers['x-api-key'] ?? request.ip),
});

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: ApiKeyDoc;
  }
}
app.decorateRequest('apiKey', null as unknown as ApiKeyDoc);
app.get('/healthz', async () => ({ status: 'ok' }));
app.addHook('preHandler', async (request: FastifyRequest, reply) => {
  if (!request.url.startsWith('/v1/')) return;
  const presented = request.headers['x-api-key'];
  if (typeof presented !== 'string') return reply.code(401).send({ error: 'missing API key' });
  const hash = hashApiKey(presented);
  let key = keysByHash.get(hash);
  if (key === undefined) {
    key = await apiKeys.findOne({ key_hash: hash });
    keysByHash.set(hash, key);
  }
  if (!key || key.revoked_at) return reply.code(401).send({ error: 'invalid API key' });
  request.apiKey = key;
});

const notFound = z.object({ error: z.string() });

async function pipelineOf(companyId: string, pipelineId: string): Promise<PipelineDoc | null> {
  const cacheKey = `${companyId}:${pipelineId}`;
  let pipeline = pipelinesById.get(cacheKey);
  if (pipeline === undefined) {
    pipeline = await pipelines.findOne({ company_id: companyId, _id: pipelineId });
    pipelinesById.set(cacheKey, pipeline);
  }
  return pipeline;
}

app.get(
  '/v1/ext/pipelines/:pipeline_id',
  { schema: { params: z.object({ pipeline_id: z.string() }), response: { 200: pipelineSchema, 404: notFound } } },
  async (request, reply) => {
    const pipeline = await pipelineOf(request.apiKey.company_id, request.params.pipeline_id);
    if (!pipeline) return reply.code(404).send({ error: 'not found' });
    return toPipelineResponse(pipeline);
  },
);

app.get(
  '/v1/ext/items/:item_id',
  { schema: { params: z.object({ item_id: z.string() }), response: { 200: itemSchema, 404: notFound } } },
  async (request, reply) => {
    const companyId = request.apiKey.company_id;
    const item = await items.findOne(
      { company_id: companyId, _id: request.params.item_id, archived_at: null },
      { projection: { pending_events: 0 } },
    );
    const pipeline = item && (await pipelineOf(companyId, item.pipeline_id));
    if (!item || !pipeline) return reply.code(404).send({ error: 'not found' });
    return toItemResponse(item, pipeline);
  },
);

app.post(
  '/v1/ext/tasks',
  { schema: { body: createTaskBody, response: { 201: taskSchema } } },
  async (request, reply) => {
    const { company_id: companyId, created_by: userId } = request.apiKey;
    const body = request.body;
    const now = new Date();
    const doc: TaskDoc = {
      _id: newId('task'),
      company_id: companyId,
      title: body.title,
      due_at: body.due_at,
      assigned_to: body.assigned_to ?? userId,
      description: body.description ?? null,
      priority: body.priority ?? 'none',
      task_type: body.task_type ?? 'to_do',
      item_id: body.item_id ?? null,
      duration_minutes: body.duration_minutes ?? null,
      reminder_minutes: body.reminder_minutes ?? null,
      notes: body.notes ?? null,
      is_completed: body.is_completed ?? false,
      created_by: userId,
      completed_at: null,
      created_at: now,
      updated_at: now,
      revision: 1,
      overdue_fired_for: null,
    };
    const task = toTaskResponse(doc);
    const event = { event_id: newId('event'), type: 'task.created', company_id: companyId, data: task };
    // The same MongoDB work as ours: the task, and its event kept as a durable record (DECISIONS.md 12.1).
    await tasks.insertOne(doc);
    await eventRecords.insertOne({ _id: event.event_id, company_id: companyId, event, recorded_at: now });
    await events.add('task.created', event, { jobId: event.event_id, removeOnComplete: true });
    return reply.code(201).send(task);
  },
);

await app.listen({ port: Number(env('PORT')), host: '127.0.0.1' });

const stop = async () => {
  await app.close();
  await events.close();
  redis.disconnect();
  await client.close();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
