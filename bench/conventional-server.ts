// The second baseline of `npm run bench` (--only=conventional): the same routes built the way a user
// would build them from stock parts, not a bare minimum: Fastify with its default logger (info:
// a line per request and per response), @fastify/rate-limit on its Redis store, request and response
// validation with fastify-type-provider-zod (our own zod schemas), an API key checked on every request
// from an in-process map, and the same MongoDB work as ours, done the plain way: a created task's
// event is inserted as a record of its own, then handed to a BullMQ queue, per request; a PATCH of an item
// reads it, checks the change against its pipeline and writes it with the expected version in the filter,
// then records and queues its event the same way. Env: PORT, MONGO_URL, MONGO_DB, REDIS_URL, QUEUE_PREFIX.
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

/** The PATCH body, written out as a service would write its own (ours: updateItemBody). */
const updateItemBody = z.strictObject({
  name: z.string().trim().min(1).max(500).optional(),
  stage_id: z.string().min(1).max(100).optional(),
  status_id: z.string().min(1).max(100).nullable().optional(),
  contact_id: z.string().max(200).nullable().optional(),
  version: z.number().int().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

app.patch(
  '/v1/ext/items/:item_id',
  {
    schema: {
      params: z.object({ item_id: z.string() }),
      body: updateItemBody,
      response: { 200: itemSchema, 400: notFound, 404: notFound, 409: notFound },
    },
  },
  async (request, reply) => {
    const companyId = request.apiKey.company_id;
    const { version, metadata = {}, ...fields } = request.body;
    const live = { company_id: companyId, _id: request.params.item_id, archived_at: null };
    // The item as it is: its pipeline judges the change, and its values are the event's "from".
    const current = await items.findOne(live, { projection: { pending_events: 0 } });
    const pipeline = current && (await pipelineOf(companyId, current.pipeline_id));
    if (!current || !pipeline) return reply.code(404).send({ error: 'not found' });
    if (version !== undefined && version !== current.version)
      return reply.code(409).send({ error: 'version conflict' });
    if (fields.stage_id !== undefined && !pipeline.stages.some((stage) => stage.stage_id === fields.stage_id))
      return reply.code(400).send({ error: 'unknown stage_id' });
    if (fields.status_id && !pipeline.statuses.some((status) => status.status_id === fields.status_id))
      return reply.code(400).send({ error: 'unknown status_id' });
    const unknown = Object.keys(metadata).filter((name) => !pipeline.fields.some((field) => field.name === name));
    if (unknown.length > 0) return reply.code(400).send({ error: `unknown fields: ${unknown.join(', ')}` });

    const now = new Date();
    const set: Record<string, unknown> = { updated_at: now };
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) set[name] = value;
    for (const [name, value] of Object.entries(metadata)) set[`custom.${name}`] = value;
    const saved = await items.findOneAndUpdate(
      { ...live, version: current.version },
      { $set: set, $inc: { version: 1 } },
      { returnDocument: 'after', projection: { pending_events: 0 } },
    );
    if (!saved) return reply.code(409).send({ error: 'version conflict' });
    const before = toItemResponse(current, pipeline);
    const item = toItemResponse(saved, pipeline);
    const changes: Record<string, { from: unknown; to: unknown }> = {};
    for (const [name, to] of Object.entries(item))
      if (name !== 'updated_at' && name !== 'version' && JSON.stringify(before[name]) !== JSON.stringify(to))
        changes[name] = { from: before[name], to };
    const event = { event_id: newId('event'), type: 'item.updated', company_id: companyId, data: item, changes };
    await eventRecords.insertOne({ _id: event.event_id, company_id: companyId, event, recorded_at: now });
    await events.add('item.updated', event, { jobId: event.event_id, removeOnComplete: true });
    return item;
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
