import { compare } from '../load.js';
import { cpuMs as cpu, cpuRatio, cpuRatiosText, int, ms, rpsRatio, type Row } from '../report.js';
import { atOnceSettings, compareSettings, cpuComparisonRate, json, type BenchContext } from './context.js';

/** The durable-events work may cost this much CPU per request. */
const DURABLE_CPU_TARGET = 1.1;

/**
 * What making events durable costs the request path (DECISIONS.md 12.1: MongoDB keeps every event):
 * create task on a web process as it runs, against one started alongside whose outbox moves publish
 * and clear but record nothing in `events` (bench/skip-event-record.ts, a preload of this scenario
 * only). Both carry the event in the task's insert and publish it; the difference is the `events`
 * insert of each move, shared by the writes of its 25 ms under load. Target: at most 10% more CPU
 * per request.
 */
export async function runDurableEventsScenario(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  console.log('Durable events: create task with and without the `events` record');
  const body = JSON.stringify({ title: 'Call back about the renewal', due_at: '2031-01-15T09:30:00Z' });
  const target = (url: string, server: string) => ({
    url,
    method: 'POST' as const,
    headers: { 'x-api-key': seeded.crud.key, ...json },
    body,
    requests: [{ method: 'POST' as const, path: '/v1/ext/tasks', body }],
    server,
  });
  const [durable, transient, unmoved] = await Promise.all([
    stack.startExtraWeb('web-durable', {}),
    stack.startExtraWeb('web-unrecorded', {}, { imports: ['bench/skip-event-record.ts'] }),
    stack.startExtraWeb('web-unmoved', {}, { imports: ['bench/skip-event-move.ts'] }),
  ]);
  try {
    const recorded = await compare(
      'create task, events recorded vs not',
      () => target(durable.url, 'web-durable'),
      () => target(transient.url, 'web-unrecorded'),
      compareSettings(options),
    );
    const { ours, baseline } = recorded;
    // Judged at once below saturation, as the conventional rows (cpuComparisonRate); since 2026-11-29T07:11Z.
    const rate = cpuComparisonRate(Math.min(ours.rps, baseline.rps));
    const atOnce = await compare(
      `create task, events recorded vs not, CPU at ${rate} req/s each, at once`,
      () => target(durable.url, 'web-durable'),
      () => target(transient.url, 'web-unrecorded'),
      atOnceSettings(options, rate),
    );
    const ratio = cpuRatio(atOnce);
    // Information: what the whole move (record, publish, clear) costs the request path on these backends.
    const moved = await compare(
      'create task, as it runs vs its events neither recorded nor queued',
      () => target(durable.url, 'web-durable'),
      () => target(unmoved.url, 'web-unmoved'),
      compareSettings(options),
    );
    const movedRatio = cpuRatio(moved);
    return [
      {
        scenario: 'create task, durable events (recorded in `events`) vs the same without that record',
        value: int(ours.rps),
        p50: ms(ours.p50),
        p99: ms(ours.p99),
        baseline: `${int(baseline.rps)} (not recorded)`,
        ratio: rpsRatio(recorded),
        target: `CPU per request ≤ ${DURABLE_CPU_TARGET}× without`,
        pass:
          ratio !== undefined &&
          ratio <= DURABLE_CPU_TARGET &&
          ours.failures + baseline.failures + atOnce.ours.failures + atOnce.baseline.failures === 0,
        note:
          `Both processes started together, same settings. Judged: CPU of the web process per request with both loaded ` +
          `at once at ${int(rate)} req/s each: ${cpu(atOnce.ours.serverCpuMs)} with the record vs ${cpu(atOnce.baseline.serverCpuMs)} without` +
          `${ratio === undefined ? '' : `, ${ratio.toFixed(2)}×, the median of the runs' ratios or, swapped between cores, of their pairs' (${cpuRatiosText(atOnce)})`}. ` +
          `At saturation, in turns: ${cpu(ours.serverCpuMs)} vs ${cpu(baseline.serverCpuMs)}` +
          `${cpuRatio(recorded) === undefined ? '' : ` (${cpuRatiosText(recorded)})`}. CPU (% of one core) during ours: ${ours.cpu}.`,
      },
      {
        scenario: 'create task as it runs vs with its events neither recorded nor queued (information)',
        value: int(moved.ours.rps),
        p50: ms(moved.ours.p50),
        p99: ms(moved.ours.p99),
        baseline: `${int(moved.baseline.rps)} (p50 ${ms(moved.baseline.p50)}, p99 ${ms(moved.baseline.p99)})`,
        ratio: rpsRatio(moved),
        target: 'information',
        pass: undefined,
        note:
          'What the after-response move (the events of each 25 ms recorded in `events`, published to both event ' +
          'queues, cleared from the outbox) costs the request path, against a web process whose move only clears ' +
          `(bench/skip-event-move.ts). CPU of the web process per request: ${cpu(moved.ours.serverCpuMs)} vs ` +
          `${cpu(moved.baseline.serverCpuMs)}${movedRatio === undefined ? '' : ` (${movedRatio.toFixed(2)}×)`}. ` +
          `CPU (% of one core) during ours: ${moved.ours.cpu}; without: ${moved.baseline.cpu}.`,
      },
    ];
  } finally {
    await Promise.all([durable, transient, unmoved].map((web) => stack.children.stop(web.child)));
  }
}
