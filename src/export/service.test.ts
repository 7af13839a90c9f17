import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { DEFAULT_DUPLICATE_DETECTION } from '../contracts/pipelines.js';
import { storedTaskDoc } from '../contracts/tasks.test-support.js';
import { ExportService, type ExportServiceDeps } from './service.js';
import type { AuthContext } from '../contracts/auth-context.js';
import type { ItemDoc } from '../contracts/items.js';
import type { PipelineDoc } from '../contracts/pipelines.js';
import type { TaskDoc } from '../contracts/tasks.js';
import type { Readable } from 'node:stream';

const at = new Date('2026-11-24T09:00:00Z');
const auth: AuthContext = {
  companyId: 'cmp_1',
  keyId: 'key_1',
  userId: 'usr_1',
  scopes: new Set(['items:read', 'tasks:read']),
  cause: { type: 'api_key', id: 'key_1' },
};

const pipeline = (id: string, fieldName: string): PipelineDoc => ({
  _id: id,
  company_id: 'cmp_1',
  name: id,
  stages: [{ stage_id: 'stg_1', name: 'New', position: 0 }],
  statuses: [],
  fields: [{ name: fieldName, type: 'number', required: false }],
  duplicate_detection: DEFAULT_DUPLICATE_DETECTION,
  revision: 1,
  created_at: at,
  updated_at: at,
});

const item = (n: number, pipelineId = 'pip_a'): ItemDoc => ({
  _id: `itm_${n}`,
  company_id: 'cmp_1',
  short_id: `I-${n}`,
  name: `Item ${n}`,
  pipeline_id: pipelineId,
  stage_id: 'stg_1',
  status_id: null,
  contact_id: null,
  source: 'api',
  custom: { deal_value: n, hidden: 'not a field of the pipeline' },
  dup_tokens: [],
  external_id: null,
  name_words: [],
  version: 1,
  created_at: at,
  updated_at: at,
  pending_events: [],
  outbox_pending: true,
});

const task = (n: number): TaskDoc =>
  storedTaskDoc({ _id: `tsk_${n}`, title: `Task ${n}`, due_at: at, created_at: at, revision: 3 });

/** A driver cursor as the export sees it: documents made on demand, counted as they are pulled, and a close. */
class FakeCursor<T> implements AsyncIterable<T> {
  pulled = 0;
  closed = 0;
  constructor(
    private readonly count: number,
    private readonly make: (n: number) => T,
  ) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    while (this.pulled < this.count) yield this.make(this.pulled++);
  }

  async close(): Promise<void> {
    this.closed++;
  }
}

interface World {
  deps: ExportServiceDeps;
  calls: string[];
  itemCursors: Array<FakeCursor<ItemDoc>>;
  taskCursors: Array<FakeCursor<TaskDoc>>;
  pipelineReads: string[];
}

function world(items: { count: number; make: (n: number) => ItemDoc }, tasks = { count: 0, make: task }): World {
  const calls: string[] = [];
  const itemCursors: Array<FakeCursor<ItemDoc>> = [];
  const taskCursors: Array<FakeCursor<TaskDoc>> = [];
  const pipelineReads: string[] = [];
  const pipelines = new Map([
    ['pip_a', pipeline('pip_a', 'deal_value')],
    ['pip_b', pipeline('pip_b', 'score')],
  ]);
  const deps: ExportServiceDeps = {
    items: {
      exportCursor(companyId, batchSize) {
        calls.push(`items.exportCursor ${companyId} ${batchSize}`);
        const cursor = new FakeCursor(items.count, items.make);
        itemCursors.push(cursor);
        return cursor;
      },
    },
    tasks: {
      exportCursor(companyId, batchSize) {
        calls.push(`tasks.exportCursor ${companyId} ${batchSize}`);
        const cursor = new FakeCursor(tasks.count, tasks.make);
        taskCursors.push(cursor);
        return cursor;
      },
    },
    pipelines: {
      async findCached(companyId, pipelineId) {
        pipelineReads.push(`${companyId}/${pipelineId}`);
        return pipelines.get(pipelineId) ?? null;
      },
    },
    feed: {
      async currentPosition(context) {
        calls.push(`feed.currentPosition ${context.companyId}`);
        return 'cur_42';
      },
    },
  };
  return { deps, calls, itemCursors, taskCursors, pipelineReads };
}

async function readAll(body: Readable): Promise<{ text: string; chunks: number }> {
  let text = '';
  let chunks = 0;
  for await (const chunk of body) {
    expect(Buffer.isBuffer(chunk)).toBe(true);
    text += String(chunk);
    chunks++;
  }
  return { text, chunks };
}

const linesOf = (text: string) => {
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line) => JSON.parse(line));
};

describe('ExportService', () => {
  it("items: the feed position first, then one API-shaped item a line from the company's cursor; the cursor closed", async () => {
    const { deps, calls, itemCursors, pipelineReads } = world({
      count: 5,
      make: (n) => item(n, n % 2 === 0 ? 'pip_a' : 'pip_b'),
    });
    const service = new ExportService(deps);
    const exported = await service.items(auth);
    expect(exported.nextCursor).toBe('cur_42');
    // The cursor is opened at the first read, after the position was taken.
    expect(calls).toEqual(['feed.currentPosition cmp_1']);

    const lines = linesOf((await readAll(exported.body)).text);
    expect(calls).toEqual(['feed.currentPosition cmp_1', 'items.exportCursor cmp_1 200']);
    expect(lines.map((line) => line.item_id)).toEqual(['itm_0', 'itm_1', 'itm_2', 'itm_3', 'itm_4']);
    expect(lines[0]).toEqual({
      item_id: 'itm_0',
      short_id: 'I-0',
      name: 'Item 0',
      pipeline: 'pip_a',
      stage: 'stg_1',
      status: null,
      contact_id: null,
      source: 'api',
      external_id: null,
      created_at: '2026-11-24T09:00:00.000Z',
      updated_at: '2026-11-24T09:00:00.000Z',
      version: 1,
      deal_value: 0,
    });
    // Each item shows its own pipeline's fields (pip_b has `score`, which these items have no value for).
    expect(lines[1]).toMatchObject({ pipeline: 'pip_b', score: null });
    expect(lines[1]).not.toHaveProperty('deal_value');
    // Nothing stored beyond the API shape leaks: outbox fields, search tokens, values of no field.
    for (const line of lines) {
      expect(line).not.toHaveProperty('pending_events');
      expect(line).not.toHaveProperty('dup_tokens');
      expect(line).not.toHaveProperty('hidden');
      expect(line).not.toHaveProperty('company_id');
    }
    // Each pipeline read once per export, however many items it has.
    expect(pipelineReads.sort()).toEqual(['cmp_1/pip_a', 'cmp_1/pip_b']);
    expect(itemCursors[0]?.closed).toBe(1);
    expect(service.active).toBe(0);
  });

  it('tasks: one API-shaped task a line', async () => {
    const { deps, calls, taskCursors } = world({ count: 0, make: item }, { count: 3, make: task });
    const exported = await new ExportService(deps).tasks(auth);
    expect(exported.nextCursor).toBe('cur_42');
    const lines = linesOf((await readAll(exported.body)).text);
    expect(calls).toEqual(['feed.currentPosition cmp_1', 'tasks.exportCursor cmp_1 200']);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toEqual({
      task_id: 'tsk_2',
      title: 'Task 2',
      due_at: '2026-11-24T09:00:00.000Z',
      assigned_to: 'usr_1',
      description: null,
      priority: 'none',
      task_type: 'call',
      item_id: null,
      duration_minutes: null,
      reminder_minutes: null,
      notes: null,
      is_completed: false,
      created_by: 'usr_1',
      completed_at: null,
      created_at: '2026-11-24T09:00:00.000Z',
      updated_at: '2026-11-24T09:00:00.000Z',
    });
    expect(taskCursors[0]?.closed).toBe(1);
  });

  it('an empty export is an empty body, its cursor closed', async () => {
    const { deps, taskCursors } = world({ count: 0, make: item });
    const { body } = await new ExportService(deps).tasks(auth);
    expect(await readAll(body)).toEqual({ text: '', chunks: 0 });
    expect(taskCursors[0]?.closed).toBe(1);
  });

  it('a large export arrives whole, written in several chunks, no line split or lost', async () => {
    const { deps } = world({ count: 0, make: item }, { count: 2_000, make: task });
    const { text, chunks } = await readAll((await new ExportService(deps).tasks(auth)).body);
    const lines = linesOf(text);
    expect(lines).toHaveLength(2_000);
    expect(lines.map((line) => line.task_id)).toEqual(Array.from({ length: 2_000 }, (_, n) => `tsk_${n}`));
    expect(chunks).toBeGreaterThan(10); // ~700 KB in chunks of about 16 KiB
  });

  it('pulls from the cursor only as the reader takes, and closes it when the reader goes away early', async () => {
    const total = 1_000_000;
    const { deps, taskCursors } = world({ count: 0, make: item }, { count: total, make: task });
    const service = new ExportService(deps);
    const { body } = await service.tasks(auth);
    const first: unknown = await new Promise((resolve) => body.once('data', resolve));
    body.pause();
    expect(Buffer.isBuffer(first)).toBe(true);
    expect(service.active).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const cursor = taskCursors[0]!;
    expect(cursor.pulled).toBeLessThan(5_000); // a few chunks buffered, not the whole million
    expect(cursor.closed).toBe(0);

    body.destroy();
    await once(body, 'close');
    await new Promise((resolve) => setImmediate(resolve));
    expect(cursor.closed).toBe(1);
    expect(cursor.pulled).toBeLessThan(5_000);
    expect(service.active).toBe(0);
  });

  it('leaves no cursor open when the reader goes away before the first read', async () => {
    const { deps, itemCursors, taskCursors } = world({ count: 3, make: item }, { count: 3, make: task });
    const service = new ExportService(deps);
    for (const exported of [await service.items(auth), await service.tasks(auth)]) {
      exported.body.destroy();
      await once(exported.body, 'close');
    }
    await new Promise((resolve) => setImmediate(resolve));
    const open = [...itemCursors, ...taskCursors].filter((cursor) => cursor.closed === 0);
    expect(open).toEqual([]);
    expect(service.active).toBe(0);
  });

  it('an item whose pipeline is missing fails the stream, and the cursor is closed', async () => {
    const { deps, itemCursors } = world({ count: 3, make: (n) => item(n, n === 1 ? 'pip_gone' : 'pip_a') });
    const service = new ExportService(deps);
    const { body } = await service.items(auth);
    await expect(readAll(body)).rejects.toThrow('pipeline pip_gone of an item is missing');
    expect(itemCursors[0]?.closed).toBe(1);
    expect(service.active).toBe(0);
  });
});
