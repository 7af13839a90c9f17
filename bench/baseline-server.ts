// The baseline of `npm run bench`: a bare Fastify app whose routes make the same MongoDB driver and
// Redis calls as ours and nothing else: no auth, no validation, no response schema, no hooks.
// Tenancy comes from the query string. Env: PORT, MONGO_URL, MONGO_DB, REDIS_URL, QUEUE_PREFIX.
import Fastify from 'fastify';
import { newId } from '../src/shared/ids.js';
import { connectMongo } from '../src/shared/mongo.js';
import { createRequestPathRedis } from '../src/shared/redis.js';
import { SlidingWindowLimiter } from '../src/shared/sliding-window.js';
import type { Document } from 'mongodb';

/** Our ids are strings, not ObjectIds. */
interface StringIdDocument extends Document {
  _id: string;
}

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`baseline-server: ${name} is required`);
  return value;
};

// The same connection settings as the web process (pool size, timeouts).
const mongo = await connectMongo(env('MONGO_URL'), env('MONGO_DB'));
const redis = createRequestPathRedis(env('REDIS_URL'));
redis.on('error', () => {});
// Only to issue the very same Lua script, in the same single round trip, as the API's rate limit.
const limiter = new SlidingWindowLimiter(redis, {
  max: 1_000_000_000,
  windowSeconds: 60,
  keyPrefix: `${env('QUEUE_PREFIX')}:bare-rl:`,
});

const items = mongo.db.collection<StringIdDocument>('items');
const pipelines = mongo.db.collection<StringIdDocument>('pipelines');
const tasks = mongo.db.collection<StringIdDocument>('tasks');

type Query = Record<string, string>;
const app = Fastify({ logger: false });

app.get('/hello', async () => ({ hello: 'world' }));

app.get('/hello-ratelimit', async () => {
  await limiter.consume('bare');
  return { hello: 'world' };
});

// Same filter, projection, sort and limit (+1 to see whether a next page exists) as GET /v1/ext/items.
app.get<{ Querystring: Query }>('/items', async (request) =>
  items
    .find(
      { company_id: request.query.company_id, pipeline_id: request.query.pipeline_id },
      { projection: { pending_events: 0, dup_tokens: 0 } },
    )
    .sort({ created_at: 1, _id: 1 })
    .limit(Number(request.query.limit ?? 50) + 1)
    .toArray(),
);

// GET /v1/ext/items/{id} also reads the item's pipeline (for its custom fields); so does this.
app.get<{ Params: { id: string }; Querystring: Query }>('/items/:id', async (request, reply) => {
  const item = await items.findOne(
    { company_id: request.query.company_id, _id: request.params.id },
    { projection: { pending_events: 0 } },
  );
  if (!item) return reply.code(404).send({ status: 404 });
  await pipelines.findOne({ company_id: request.query.company_id, _id: item.pipeline_id });
  return item;
});

// One insertOne of a task document carrying its recorded event, as POST /v1/ext/tasks writes it
// (without the outbox flag, so the relay never picks these up).
app.post<{ Body: { title: string; due_at: string }; Querystring: Query }>('/tasks', async (request, reply) => {
  const now = new Date();
  const companyId = request.query.company_id;
  const doc = {
    _id: newId('task'),
    company_id: companyId,
    title: request.body.title,
    due_at: new Date(request.body.due_at),
    assigned_to: request.query.user_id,
    description: null,
    priority: 'none',
    task_type: 'to_do',
    item_id: null,
    duration_minutes: null,
    reminder_minutes: null,
    notes: null,
    is_completed: false,
    created_by: request.query.user_id,
    completed_at: null,
    created_at: now,
    updated_at: now,
    revision: 1,
    overdue_fired_for: null,
  };
  const event = {
    event_id: newId('event'),
    type: 'task.created',
    company_id: companyId,
    occurred_at: now.toISOString(),
    data: { ...doc },
  };
  await tasks.insertOne({ ...doc, pending_events: [event] });
  return reply.code(201).send(doc);
});

// The optimistic lock's single findOneAndUpdate with the expected version in the filter.
app.patch<{ Params: { id: string }; Querystring: Query; Body: { name: string; version: number } }>(
  '/items/:id',
  async (request, reply) => {
    const updated = await items.findOneAndUpdate(
      { company_id: request.query.company_id, _id: request.params.id, version: request.body.version },
      { $set: { name: request.body.name, updated_at: new Date() }, $inc: { version: 1 } },
      { returnDocument: 'after', projection: { pending_events: 0 } },
    );
    if (!updated) return reply.code(409).send({ status: 409 });
    return updated;
  },
);

await app.listen({ port: Number(env('PORT')), host: '127.0.0.1' });

const stop = async () => {
  await app.close();
  redis.disconnect();
  await mongo.client.close();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
