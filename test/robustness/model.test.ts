import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { must } from '../../src/shared/must.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createTenant, ext, type Tenant } from '../helpers/fixtures.js';

/**
 * Model-based test: random sequences of item and task writes (create, update, upsert by external id,
 * batch, delete) and lists run against the API and against a small model of what the API promises
 * (DECISIONS.md sections 5, 6, 8 and 12.3); after every step the API's answer must match the model.
 */
interface ItemModel {
  id: string;
  shortId: string;
  name: string;
  stage: string;
  version: number;
  createdAt: string;
  externalId: string | null;
}
interface TaskModel {
  id: string;
  title: string;
  dueAt: string;
  isCompleted: boolean;
  completedAt: string | null;
}
interface Model {
  items: ItemModel[];
  tasks: TaskModel[];
  shortIds: Set<string>;
  /** Deleted (archived) records: GET answers 404 and lists leave them out. */
  deletedItems: string[];
  deletedTasks: string[];
}
interface Real {
  tenant: Tenant;
}

const RUNS = Number(process.env.MODEL_RUNS ?? 30);
const SEED = Number(process.env.MODEL_SEED ?? 4_242);
const NAMES = ['Deal', 'Renewal', 'Upsell', 'Pilot'];
const EXTERNAL_IDS = ['crm-1', 'crm-2', 'crm-3'];
const DUE_BASE = Date.parse('2026-11-22T09:00:00.000Z');
// Few distinct due times, so equal ones are common and the tie-break by id is exercised.
const dueAt = (slot: number) => new Date(DUE_BASE + slot * 3_600_000).toISOString();

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ RATE_LIMIT_MAX: '1000000000' });
});
afterAll(async () => t?.close());

const byKeyThenId =
  <T extends { id: string }>(key: (row: T) => string) =>
  (a: T, b: T) =>
    key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

function expectItem(actual: Record<string, unknown>, expected: ItemModel) {
  expect(actual).toMatchObject({
    item_id: expected.id,
    short_id: expected.shortId,
    name: expected.name,
    stage: expected.stage,
    version: expected.version,
    created_at: expected.createdAt,
    external_id: expected.externalId,
  });
}

function expectTask(actual: Record<string, unknown>, expected: TaskModel) {
  expect(actual).toMatchObject({
    task_id: expected.id,
    title: expected.title,
    due_at: expected.dueAt,
    is_completed: expected.isCompleted,
    completed_at: expected.completedAt,
  });
}

class CreateItem implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly name: string,
    readonly stage: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const response = await ext(t.app, r.tenant.key, 'POST', '/items', {
      name: this.name,
      pipeline_id: r.tenant.pipelineId,
      stage_id: r.tenant.stageIds[this.stage],
    });
    expect(response.statusCode, response.body).toBe(201);
    const body = response.json();
    expect(body.short_id).toMatch(/^[A-Za-z0-9-]{1,12}$/);
    expect(m.shortIds.has(body.short_id), `short_id ${String(body.short_id)} reused`).toBe(false);
    const item = {
      id: body.item_id,
      shortId: body.short_id,
      name: this.name,
      stage: must(r.tenant.stageIds[this.stage], 'a stage id'),
      version: 1,
      createdAt: body.created_at,
      externalId: null,
    };
    expectItem(body, item);
    m.items.push(item);
    m.shortIds.add(item.shortId);
  }
  toString = () => `CreateItem(${this.name}, stage ${this.stage})`;
}

class UpdateItem implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly pick: number,
    readonly change: { name?: string; stage?: number },
    readonly versionMode: 'current' | 'stale' | 'none',
  ) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real) {
    const item = must(m.items[this.pick % m.items.length], 'an item (check() ensured one)');
    const stale = item.version > 1 ? item.version - 1 : item.version + 1;
    const body = {
      ...(this.change.name !== undefined ? { name: this.change.name } : {}),
      ...(this.change.stage !== undefined ? { stage_id: r.tenant.stageIds[this.change.stage] } : {}),
      ...(this.versionMode === 'none' ? {} : { version: this.versionMode === 'current' ? item.version : stale }),
    };
    const response = await ext(t.app, r.tenant.key, 'PATCH', `/items/${item.id}`, body);
    if (this.versionMode === 'stale') {
      expect(response.statusCode, response.body).toBe(409);
      expect(response.json()).toMatchObject({ code: 'version_conflict', current_version: item.version });
    } else {
      expect(response.statusCode, response.body).toBe(200);
      const next = { ...item, name: body.name ?? item.name, stage: body.stage_id ?? item.stage };
      // Exactly +1 when something changed; a no-op PATCH keeps the version.
      if (next.name !== item.name || next.stage !== item.stage) next.version += 1;
      Object.assign(item, next);
      expectItem(response.json(), item);
    }
    expectItem((await ext(t.app, r.tenant.key, 'GET', `/items/${item.id}`)).json(), item);
  }
  toString = () => `UpdateItem(#${this.pick}, ${JSON.stringify(this.change)}, ${this.versionMode} version)`;
}

class CreateTask implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly title: string,
    readonly slot: number,
    readonly completed: boolean | undefined,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const before = Date.now();
    const response = await ext(t.app, r.tenant.key, 'POST', '/tasks', {
      title: this.title,
      due_at: dueAt(this.slot),
      ...(this.completed === undefined ? {} : { is_completed: this.completed }),
    });
    expect(response.statusCode, response.body).toBe(201);
    const body = response.json();
    const task = {
      id: body.task_id,
      title: this.title,
      dueAt: dueAt(this.slot),
      isCompleted: this.completed ?? false,
      completedAt: body.completed_at,
    };
    if (task.isCompleted) expect(Date.parse(body.completed_at)).toBeGreaterThanOrEqual(before - 5);
    else expect(body.completed_at).toBeNull();
    expectTask(body, task);
    m.tasks.push(task);
  }
  toString = () => `CreateTask(${this.title}, slot ${this.slot}, completed ${this.completed})`;
}

class UpdateTask implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly pick: number,
    readonly change: { completed?: boolean; title?: string; slot?: number },
  ) {}
  check = (m: Readonly<Model>) => m.tasks.length > 0;
  async run(m: Model, r: Real) {
    const task = must(m.tasks[this.pick % m.tasks.length], 'a task (check() ensured one)');
    const body = {
      ...(this.change.completed !== undefined ? { is_completed: this.change.completed } : {}),
      ...(this.change.title !== undefined ? { title: this.change.title } : {}),
      ...(this.change.slot !== undefined ? { due_at: dueAt(this.change.slot) } : {}),
    };
    const before = Date.now();
    const response = await ext(t.app, r.tenant.key, 'PATCH', `/tasks/${task.id}`, body);
    expect(response.statusCode, response.body).toBe(200);
    const returned = response.json();
    const completed = this.change.completed ?? task.isCompleted;
    // false→true stamps now, true→true keeps the stamp, →false clears it (DECISIONS.md section 8).
    if (completed && !task.isCompleted) {
      expect(Date.parse(returned.completed_at)).toBeGreaterThanOrEqual(before - 5);
      task.completedAt = returned.completed_at;
    } else if (!completed) {
      task.completedAt = null;
    }
    Object.assign(task, { isCompleted: completed, title: body.title ?? task.title, dueAt: body.due_at ?? task.dueAt });
    expectTask(returned, task);
  }
  toString = () => `UpdateTask(#${this.pick}, ${JSON.stringify(this.change)})`;
}

/** Records a newly created item in the model (short_id fresh and never reused). */
function addItem(m: Model, body: Record<string, unknown>, item: ItemModel) {
  expect(m.shortIds.has(body.short_id as string), `short_id ${String(body.short_id)} reused`).toBe(false);
  m.items.push(item);
  m.shortIds.add(item.shortId);
}

/** The model's answer to an upsert of `externalId`: an update of the live item holding it, or a create. */
function applyUpsert(
  m: Model,
  r: Real,
  externalId: string,
  change: { name: string; stage: number },
  status: number,
  body: Record<string, unknown>,
) {
  const existing = m.items.find((item) => item.externalId === externalId);
  const stage = must(r.tenant.stageIds[change.stage], 'a stage');
  if (existing) {
    expect(status, JSON.stringify(body)).toBe(200);
    if (existing.name !== change.name || existing.stage !== stage) existing.version += 1;
    Object.assign(existing, { name: change.name, stage });
    expectItem(body, existing);
  } else {
    expect(status, JSON.stringify(body)).toBe(201);
    const item = {
      id: body.item_id as string,
      shortId: body.short_id as string,
      name: change.name,
      stage,
      version: 1,
      createdAt: body.created_at as string,
      externalId,
    };
    expectItem(body, item);
    addItem(m, body, item);
  }
}

const itemBody = (r: Real, name: string, stage: number) => ({
  name,
  pipeline_id: r.tenant.pipelineId,
  stage_id: r.tenant.stageIds[stage],
});

class UpsertItem implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly externalId: string,
    readonly change: { name: string; stage: number },
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const response = await ext(
      t.app,
      r.tenant.key,
      'PUT',
      `/items/by-external-id/${this.externalId}`,
      itemBody(r, this.change.name, this.change.stage),
    );
    applyUpsert(m, r, this.externalId, this.change, response.statusCode, response.json());
  }
  toString = () => `UpsertItem(${this.externalId}, ${JSON.stringify(this.change)})`;
}

class DeleteItem implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.items.length > 0;
  async run(m: Model, r: Real) {
    const item = must(m.items.splice(this.pick % m.items.length, 1)[0], 'an item');
    expect((await ext(t.app, r.tenant.key, 'DELETE', `/items/${item.id}`)).statusCode).toBe(204);
    m.deletedItems.push(item.id);
    for (const id of m.deletedItems) {
      expect((await ext(t.app, r.tenant.key, 'GET', `/items/${id}`)).statusCode).toBe(404);
      expect((await ext(t.app, r.tenant.key, 'DELETE', `/items/${id}`)).statusCode).toBe(404);
    }
  }
  toString = () => `DeleteItem(#${this.pick})`;
}

class DeleteTask implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = (m: Readonly<Model>) => m.tasks.length > 0;
  async run(m: Model, r: Real) {
    const task = must(m.tasks.splice(this.pick % m.tasks.length, 1)[0], 'a task');
    expect((await ext(t.app, r.tenant.key, 'DELETE', `/tasks/${task.id}`)).statusCode).toBe(204);
    m.deletedTasks.push(task.id);
    for (const id of m.deletedTasks) {
      expect((await ext(t.app, r.tenant.key, 'GET', `/tasks/${id}`)).statusCode).toBe(404);
    }
  }
  toString = () => `DeleteTask(#${this.pick})`;
}

type BatchOp =
  | { op: 'create'; name: string; stage: number }
  | { op: 'update'; pick: number; name: string }
  | { op: 'upsert'; externalId: string; name: string; stage: number };

class Batch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly operations: BatchOp[]) {}
  check = () => true;
  async run(m: Model, r: Real) {
    // Updates aim at items that exist before the batch (or at a deleted one, which must be a 404 row).
    const targets = this.operations.map((operation) => {
      if (operation.op !== 'update') return undefined;
      const pool = [...m.items.map((item) => item.id), ...m.deletedItems];
      return pool.length === 0 ? 'itm_000000000000000000000000' : pool[operation.pick % pool.length];
    });
    const response = await ext(t.app, r.tenant.key, 'POST', '/items/batch', {
      operations: this.operations.map((operation, index) =>
        operation.op === 'create'
          ? { op: 'create', ...itemBody(r, operation.name, operation.stage) }
          : operation.op === 'update'
            ? { op: 'update', item_id: targets[index], name: operation.name }
            : { op: 'upsert', external_id: operation.externalId, ...itemBody(r, operation.name, operation.stage) },
      ),
    });
    expect(response.statusCode, response.body).toBe(200);
    const results = response.json().results as Array<{ status: number; item?: Record<string, unknown> }>;
    expect(results).toHaveLength(this.operations.length);
    this.operations.forEach((operation, index) => {
      const { status, item: body } = results[index]!;
      if (operation.op === 'create') {
        expect(status).toBe(201);
        const item = {
          id: body!.item_id as string,
          shortId: body!.short_id as string,
          name: operation.name,
          stage: must(r.tenant.stageIds[operation.stage], 'a stage'),
          version: 1,
          createdAt: body!.created_at as string,
          externalId: null,
        };
        expectItem(body!, item);
        addItem(m, body!, item);
      } else if (operation.op === 'update') {
        const item = m.items.find((candidate) => candidate.id === targets[index]);
        if (!item) return expect(status).toBe(404);
        expect(status).toBe(200);
        if (item.name !== operation.name) item.version += 1;
        item.name = operation.name;
        expectItem(body!, item);
      } else applyUpsert(m, r, operation.externalId, operation, status, body!);
    });
  }
  toString = () => `Batch(${JSON.stringify(this.operations)})`;
}

class ListItems implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const listed = (await ext(t.app, r.tenant.key, 'GET', '/items?limit=200')).json<Array<Record<string, unknown>>>();
    const expected = [...m.items].sort(byKeyThenId((item) => item.createdAt));
    expect(listed.map((item) => item.item_id)).toEqual(expected.map((item) => item.id));
    listed.forEach((item, index) => expectItem(item, must(expected[index], `expected item ${index}`)));
  }
  toString = () => 'ListItems';
}

class ListTasks implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const listed = (await ext(t.app, r.tenant.key, 'GET', '/tasks?limit=200')).json<Array<Record<string, unknown>>>();
    const expected = [...m.tasks].sort(byKeyThenId((task) => task.dueAt));
    expect(listed.map((task) => task.task_id)).toEqual(expected.map((task) => task.id));
    listed.forEach((task, index) => expectTask(task, must(expected[index], `expected task ${index}`)));
    const open = (await ext(t.app, r.tenant.key, 'GET', '/tasks?limit=200&is_completed=false')).json<
      Array<{ task_id: string }>
    >();
    expect(open.map((task) => task.task_id)).toEqual(
      expected.filter((task) => !task.isCompleted).map((task) => task.id),
    );
  }
  toString = () => 'ListTasks';
}

const name = fc.constantFrom(...NAMES);
const stage = fc.integer({ min: 0, max: 2 });
const slot = fc.integer({ min: 0, max: 2 });
const commands = [
  fc.tuple(name, stage).map(([itemName, itemStage]) => new CreateItem(itemName, itemStage)),
  fc
    .tuple(
      fc.nat(),
      fc.record({ name, stage }, { requiredKeys: [] }),
      fc.constantFrom<Array<'current' | 'stale' | 'none'>>('current', 'stale', 'none'),
    )
    .map(([pick, change, mode]) => new UpdateItem(pick, change, mode)),
  fc
    .tuple(name, slot, fc.option(fc.boolean(), { nil: undefined }))
    .map(([title, due, completed]) => new CreateTask(title, due, completed)),
  fc
    .tuple(fc.nat(), fc.record({ completed: fc.boolean(), title: name, slot }, { requiredKeys: [] }))
    .map(([pick, change]) => new UpdateTask(pick, change)),
  fc.constant(new ListItems()),
  fc.constant(new ListTasks()),
  fc
    .tuple(fc.constantFrom(...EXTERNAL_IDS), fc.record({ name, stage }))
    .map(([externalId, change]) => new UpsertItem(externalId, change)),
  fc.nat().map((pick) => new DeleteItem(pick)),
  fc.nat().map((pick) => new DeleteTask(pick)),
  fc
    .array(
      fc.oneof(
        fc.record({ op: fc.constant('create' as const), name, stage }),
        fc.record({ op: fc.constant('update' as const), pick: fc.nat(), name }),
        fc.record({ op: fc.constant('upsert' as const), externalId: fc.constantFrom(...EXTERNAL_IDS), name, stage }),
      ),
      { minLength: 1, maxLength: 6 },
    )
    .map((operations) => new Batch(operations)),
];

describe('items and tasks against a model of the API', () => {
  it('agree after every step of random create, update, upsert, batch, delete and list sequences', async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 25 }), async (sequence) => {
        const setup = async () => ({
          model: { items: [], tasks: [], shortIds: new Set<string>(), deletedItems: [], deletedTasks: [] } as Model,
          real: { tenant: await createTenant(t.app) },
        });
        await fc.asyncModelRun(setup, sequence);
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 120_000);
});
