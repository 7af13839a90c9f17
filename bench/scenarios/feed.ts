import { buildEvent } from '../../src/contracts/envelope.js';
import { EventsRepository } from '../../src/events/repository.js';
import { newId } from '../../src/shared/ids.js';
import { int, ms, type Row } from '../report.js';
import type { BenchContext } from './context.js';

const WRITERS = 16;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
}

/**
 * Feed lag (DECISIONS.md 13.1): from the answer to a task create to the moment a client tailing the feed
 * with `wait` receives its task.created, while WRITERS clients create tasks as fast as they are answered
 * (the create-task load) and one worker process runs. Only through HTTP, as an integrator sees it.
 */
export async function runFeedLagScenario(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const tenant = seeded.hooks;
  const headers = { 'x-api-key': tenant.key, 'content-type': 'application/json' };
  const base = `${stack.web.url}/v1/ext`;
  const seconds = options.quick ? 5 : 15;

  // Start at the end of the feed as it is now.
  const start = await fetch(`${base}/events?limit=1&type=task.created`, { headers });
  let cursor = start.headers.get('x-next-cursor') ?? undefined;
  for (let page = await start.json(); (page as unknown[]).length > 0;) {
    const next = await fetch(`${base}/events?limit=200&type=task.created&cursor=${encodeURIComponent(cursor!)}`, {
      headers,
    });
    cursor = next.headers.get('x-next-cursor') ?? cursor;
    page = await next.json();
  }

  const answeredAt = new Map<string, number>();
  const lags: number[] = [];
  let writing = true;
  let created = 0;
  const tailer = (async () => {
    while (writing || lags.length < answeredAt.size) {
      const response = await fetch(
        `${base}/events?limit=200&wait=2&type=task.created&cursor=${encodeURIComponent(cursor!)}`,
        { headers },
      );
      const events = (await response.json()) as Array<{ data: { task_id: string } }>;
      const now = performance.now();
      cursor = response.headers.get('x-next-cursor') ?? cursor;
      for (const event of events) {
        const at = answeredAt.get(event.data.task_id);
        if (at !== undefined) lags.push(now - at);
      }
      if (!writing && events.length === 0) break;
    }
  })();
  const until = performance.now() + seconds * 1_000;
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      while (performance.now() < until) {
        const response = await fetch(`${base}/tasks`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ title: 'Feed lag', due_at: '2031-01-01T00:00:00Z' }),
        });
        const body = (await response.json()) as { task_id?: string };
        if (response.status === 201 && body.task_id) {
          answeredAt.set(body.task_id, performance.now());
          created++;
        }
      }
    }),
  );
  writing = false;
  await tailer;
  const sorted = lags.sort((a, b) => a - b);
  const p99 = percentile(sorted, 99);
  return [
    ...(await sequencerThroughput(context)),
    {
      scenario: `feed lag: create task answered → readable in a tailing wait request (${WRITERS} writers, ${seconds} s)`,
      value: `${created.toLocaleString('en-US')} creates (${Math.round(created / seconds)}/s), ${lags.length.toLocaleString('en-US')} seen`,
      p50: ms(percentile(sorted, 50)),
      p99: ms(p99),
      // Information; a create the tail never saw is a broken run.
      pass: lags.length === created ? undefined : false,
    },
  ];
}

/**
 * How many events per second the one sequencer makes readable: a backlog recorded at once (as the relay
 * leaves it after an outage), timed until the feed's position reaches its last event.
 */
async function sequencerThroughput(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const tenant = seeded.hooks;
  const count = options.quick ? 5_000 : 20_000;
  const companies = 10;
  const events = Array.from({ length: count }, (_, index) =>
    buildEvent(
      'task.created',
      index % companies === 0 ? tenant.companyId : `cmp_bench_${index % companies}`,
      { task_id: newId('task') },
      { actor: { type: 'system' } },
    ),
  );
  const repository = new EventsRepository(stack.db);
  const headers = { 'x-api-key': tenant.key };
  const started = performance.now();
  for (let i = 0; i < events.length; i += 1_000) await repository.record(events.slice(i, i + 1_000));
  const last = events.filter((event) => event.company_id === tenant.companyId).at(-1)!;
  for (;;) {
    const response = await fetch(`${stack.web.url}/v1/ext/events/${last.event_id}`, { headers });
    if (response.status === 200) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const seconds = (performance.now() - started) / 1_000;
  return [
    {
      scenario: `sequencer: a backlog of ${int(count)} events of ${companies} companies made readable`,
      value: `${int(count / seconds)} events/s (${seconds.toFixed(1)} s)`,
    },
  ];
}
