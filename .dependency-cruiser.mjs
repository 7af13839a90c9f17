// The house's import rules, checked by `npm run lint` (`depcruise`). Floors from the ground up:
//   ground     src/shared, src/telemetry, src/http: infrastructure (MongoDB, Redis, queues, logging, errors, HTTP plumbing)
//   contracts  src/contracts: what a payload looks like (resource schemas, the event union, job payloads); no I/O
//   features   src/<feature>: side by side; a feature never imports another one (the container hands it
//              what it needs through a narrow type the feature declares itself)
//   api        src/api: the two API roots (ext, admin), the OpenAPI documents, ops routes
//   container  src/container.ts, src/repositories.ts: builds every repository, service and processor once
//   entry      src/app.ts, then src/web.ts, src/server.ts, workers/
// An import may only go down (or stay within its own folder). Type-only imports count too, cycles included.
const FEATURES =
  'items|tasks|pipelines|auth|companies|users|hooks|automations|events|history|export|erasure|idempotency';
const GROUND = '^src/(shared|telemetry|http)/';
const CONTRACTS = '^src/contracts/';
const FEATURE = `^src/(${FEATURES})/`;
const API = '^src/api/';
const CONTAINER = '^src/(container|repositories)\\.ts$';
const APP = '^src/app\\.ts$';
const ENTRY = '^(src/(web|server|dev)\\.ts|workers/)';
const TOOLING = '^(src/dev/|test/|bench/|scripts/)';

const above = (name, from, ...higher) => ({
  name,
  severity: 'error',
  comment: `${name}: imports only go down a floor (see the top of .dependency-cruiser.mjs)`,
  from: { path: from },
  to: { path: higher.join('|') },
});

export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, type-only imports included.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'feature-to-feature',
      severity: 'error',
      comment:
        'Features stand side by side: one never imports another (declare a narrow type; the container wires it).',
      from: { path: `^src/(${FEATURES})/` },
      to: { path: FEATURE, pathNot: '^src/$1/' },
    },
    above('ground-goes-up', GROUND, CONTRACTS, FEATURE, API, CONTAINER, APP, ENTRY),
    above('contracts-go-up', CONTRACTS, FEATURE, API, CONTAINER, APP, ENTRY),
    above('feature-goes-up', FEATURE, API, CONTAINER, APP, ENTRY),
    above('api-goes-up', API, CONTAINER, APP, ENTRY),
    above('container-goes-up', CONTAINER, APP, ENTRY),
    above('app-goes-up', APP, ENTRY),
    {
      name: 'product-to-tooling',
      severity: 'error',
      comment: 'Product code never reaches development tooling, tests, benchmarks or scripts.',
      from: { path: '^(src|workers)/', pathNot: '^src/(dev/|dev\\.ts$)' },
      to: { path: TOOLING },
    },
    {
      name: 'web-to-workers',
      severity: 'error',
      comment: 'The web side never reaches into the worker entry points (the development runner starts both).',
      from: { path: '^src/', pathNot: '^src/dev\\.ts$' },
      to: { path: '^workers/' },
    },
    {
      name: 'sdk-alone',
      severity: 'error',
      comment: 'The SDK ships on its own: only its generated types and openapi-fetch, never the service.',
      from: { path: '^sdk/src/' },
      to: { path: '^(src|workers|test|bench|scripts)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|dist)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
