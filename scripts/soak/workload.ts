import { must } from '../../src/shared/must.js';

/** A mixed API workload: each loop owns the records it creates, so the events it caused are exactly countable. */
export interface WorkloadTenant {
  key: string;
  pipelineId: string;
  stageIds: string[];
}

export interface WorkloadStats {
  statuses: Map<number, number>;
  connectionErrors: number;
  itemsCreated: Set<string>;
  tasksCreated: Set<string>;
  /** Events the successful responses imply (creates, effective updates, completions). */
  eventsExpected: number;
  requests: number;
  /** The first few 5xx answers, each with when, what and which web process: a failing soak says why. */
  serverErrorSamples: string[];
  startedAt: number;
}

const SERVER_ERROR_SAMPLES = 10;

export function newStats(): WorkloadStats {
  return {
    statuses: new Map(),
    connectionErrors: 0,
    itemsCreated: new Set(),
    tasksCreated: new Set(),
    eventsExpected: 0,
    requests: 0,
    serverErrorSamples: [],
    startedAt: Date.now(),
  };
}

/** The fields of an item or task response this workload reads. */
interface ApiRecord {
  item_id: string;
  task_id: string;
  version: number;
}

const pick = <T>(values: T[]): T => must(values[Math.floor(Math.random() * values.length)], 'a value to pick');

export async function runLoop(
  tenants: WorkloadTenant[],
  bases: () => string[],
  stats: WorkloadStats,
  shouldStop: () => boolean,
): Promise<void> {
  const items: Array<{ id: string; version: number }> = [];
  const openTasks: string[] = [];
  const tenant = pick(tenants);

  async function call(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: ApiRecord } | undefined> {
    // Like a load balancer: on a refused connection, try the next live web process once.
    for (let attempt = 0; attempt < 2; attempt++) {
      const base = pick(bases());
      try {
        stats.requests++;
        const response = await fetch(`${base}/v1/ext${path}`, {
          method,
          headers: { 'x-api-key': tenant.key, ...(body ? { 'content-type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined,
        });
        const text = await response.text();
        stats.statuses.set(response.status, (stats.statuses.get(response.status) ?? 0) + 1);
        if (response.status >= 500 && stats.serverErrorSamples.length < SERVER_ERROR_SAMPLES) {
          const seconds = ((Date.now() - stats.startedAt) / 1000).toFixed(1);
          stats.serverErrorSamples.push(
            `${seconds}s ${method} ${path} on ${base}: ${response.status} ${text.slice(0, 300)}`,
          );
        }
        return { status: response.status, json: (text ? JSON.parse(text) : {}) as ApiRecord };
      } catch {
        stats.connectionErrors++;
      }
    }
    return undefined;
  }

  while (!shouldStop()) {
    const roll = Math.random();
    if (roll < 0.35 || items.length === 0) {
      const result = await call('POST', '/items', {
        name: `soak ${Math.random()}`,
        pipeline_id: tenant.pipelineId,
        stage_id: tenant.stageIds[0],
      });
      if (result?.status === 201) {
        items.push({ id: result.json.item_id, version: 1 });
        stats.itemsCreated.add(result.json.item_id);
        stats.eventsExpected += 1;
      }
    } else if (roll < 0.55) {
      const item = pick(items);
      const result = await call('PATCH', `/items/${item.id}`, {
        stage_id: pick(tenant.stageIds),
        name: `renamed ${Math.random()}`,
        version: item.version,
      });
      if (result?.status === 200) {
        if (result.json.version > item.version) stats.eventsExpected += 1;
        item.version = result.json.version;
      }
    } else if (roll < 0.8) {
      const result = await call('POST', '/tasks', {
        title: `soak task ${Math.random()}`,
        due_at: '2099-01-01T00:00:00Z',
      });
      if (result?.status === 201) {
        openTasks.push(result.json.task_id);
        stats.tasksCreated.add(result.json.task_id);
        stats.eventsExpected += 1;
      }
    } else if (roll < 0.92 && openTasks.length > 0) {
      const taskId = openTasks.pop()!;
      const result = await call('PATCH', `/tasks/${taskId}`, { is_completed: true });
      if (result?.status === 200)
        stats.eventsExpected += 2; // task.updated + task.completed
      else openTasks.push(taskId);
    } else {
      await call('GET', '/items?limit=20');
    }
  }
}
