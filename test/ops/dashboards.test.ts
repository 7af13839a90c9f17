import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { compiledTree, REPO_ROOT, run, type RunningProcess } from '../helpers/compiled.js';

const dashboard = JSON.parse(readFileSync(`${REPO_ROOT}/deploy/grafana/pipeline-records.json`, 'utf8'));
const rules = parse(readFileSync(`${REPO_ROOT}/deploy/prometheus/alerts.yml`, 'utf8'));

const PROMQL_WORDS = new Set([
  'sum', 'max', 'min', 'avg', 'count', 'by', 'without', 'rate', 'irate', 'increase', 'delta', 'histogram_quantile',
  'and', 'or', 'unless', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'label_values',
]); // prettier-ignore

/** Metric names in a PromQL expression: identifiers outside label matchers, groupings and strings that are not functions. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"[^"]*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '');
  return [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)]
    .map((match) => match[0])
    .filter((word) => !PROMQL_WORDS.has(word) && !word.startsWith('$'));
}

const dashboardExprs: string[] = dashboard.panels.flatMap((panel: { targets?: Array<{ expr: string }> }) =>
  (panel.targets ?? []).map((target) => target.expr),
);
const ruleExprs: string[] = rules.groups.flatMap((group: { rules: Array<{ expr: string }> }) =>
  group.rules.map((rule) => rule.expr),
);

let t: TestApp;
let worker: RunningProcess | undefined;
let exposed: string;
beforeAll(async () => {
  t = await buildTestApp();
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const metricsPort = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  worker = run(['node', 'dist/workers/main.js'], await compiledTree(), {
    MONGO_URL: t.config.MONGO_URL!,
    MONGO_DB: t.config.MONGO_DB,
    REDIS_URL: t.config.REDIS_URL,
    QUEUE_PREFIX: t.config.QUEUE_PREFIX,
    METRICS_PORT: String(metricsPort),
    LOG_LEVEL: 'info',
  });
  await worker.waitForLine(/worker process ready/);
  const web = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
  const workers = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  exposed = `${web}\n${workers}`;
}, 120_000);
afterAll(async () => {
  worker?.child.kill('SIGKILL');
  await t?.close();
});

/** Whether the web or worker exposition declares the metric (a histogram's series by its base name). */
function isExposed(name: string): boolean {
  const base = name.replace(/_(bucket|count|sum)$/, '');
  return new RegExp(`^# TYPE (${name}|${base} histogram)\\b`, 'm').test(exposed);
}

describe('deploy/: Grafana dashboard and Prometheus alert rules', () => {
  it('cover request rate, errors and latency per route, 429s, queues, outbox, webhooks and the overdue scan', () => {
    const named = new Set([...dashboardExprs, ...ruleExprs].flatMap(metricNames));
    for (const metric of [
      'http_request_duration_seconds_count',
      'http_request_duration_seconds_bucket',
      'rate_limit_rejections_total',
      'queue_jobs',
      'queue_oldest_waiting_seconds',
      'outbox_pending_documents',
      'webhook_deliveries_total',
      'overdue_scan_duration_seconds_bucket',
    ])
      expect(named, metric).toContain(metric);
    for (const group of rules.groups)
      for (const rule of group.rules) {
        expect(rule.alert).toMatch(/^PipelineRecords[A-Za-z]+$/);
        expect(rule.labels.severity).toMatch(/^(page|ticket)$/);
        expect(rule.annotations.summary).toEqual(expect.any(String));
      }
  });

  it('name only metrics that the web process /metrics or a worker METRICS_PORT expose', () => {
    const named = [...new Set([...dashboardExprs, ...ruleExprs].flatMap(metricNames))];
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((name) => !isExposed(name))).toEqual([]);
  });
});
