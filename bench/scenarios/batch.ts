import { compare, type LoadTarget } from '../load.js';
import { int, ms, type Row } from '../report.js';
import { compareSettings, json, type BenchContext } from './context.js';

const BATCH_SIZE = 100;
const BATCH_TARGET = 3;

/**
 * Items per second created through POST /items/batch (100 creates a request) against the same
 * items created one POST /items each, same process, same run. Target: at least 3×, what makes the
 * batch route worth a client's switch.
 */
export async function runBatchScenario(context: BenchContext): Promise<Row[]> {
  const { stack, seeded, options } = context;
  const tenant = seeded.crud;
  const item = (index: number) => ({
    name: `Batch deal ${index}`,
    pipeline_id: tenant.pipelineId,
    stage_id: tenant.stageIds[index % tenant.stageIds.length],
    metadata: { deal_value: 1_000 + index, industry: 'software' },
  });
  const target = (path: string, body: string): LoadTarget => ({
    url: stack.web.url,
    server: 'web',
    method: 'POST',
    body,
    headers: { 'x-api-key': tenant.key, ...json },
    requests: [{ method: 'POST', path, body }],
  });
  const batchBody = JSON.stringify({
    operations: Array.from({ length: BATCH_SIZE }, (_, index) => ({ op: 'create', ...item(index) })),
  });
  const singleBody = JSON.stringify(item(0));

  console.log('Batch scenario');
  const comparison = await compare(
    'batch of 100 creates vs single creates',
    () => target('/v1/ext/items/batch', batchBody),
    () => target('/v1/ext/items', singleBody),
    compareSettings(options),
  );
  const batchItems = comparison.ours.rps * BATCH_SIZE;
  const singleItems = comparison.baseline.rps;
  const ratio = batchItems / singleItems;
  const failed = comparison.ours.failures + comparison.baseline.failures;
  return [
    {
      scenario: 'create items: batch of 100 (items/s)',
      value: int(batchItems),
      p50: ms(comparison.ours.p50),
      p99: ms(comparison.ours.p99),
      baseline: `${int(singleItems)} items/s by single POST /items (p50 ${ms(comparison.baseline.p50)}, p99 ${ms(comparison.baseline.p99)})`,
      ratio,
      target: `ratio ≥ ${BATCH_TARGET}`,
      pass: ratio >= BATCH_TARGET && failed === 0,
      note: `Ours: POST /v1/ext/items/batch with 100 create operations (one validation per item against the cached pipeline, one short_id block, one unordered insertMany carrying each item's item.created event); baseline: the same items one POST /v1/ext/items each, against the same web process. Latencies are per request (a batch request creates 100 items). CPU (% of one core) during the batch: ${comparison.ours.cpu}; during single creates: ${comparison.baseline.cpu}.`,
    },
  ];
}
