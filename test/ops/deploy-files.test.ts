import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/** OpenTelemetry's preload (src/telemetry/preload.ts): before the entry point, so instrumentation sees every import. */
const PRELOAD = './dist/src/telemetry/preload.js';
/** A young generation of fixed size, larger for the worker: docs/operations.md ("Memory"). */
const WEB_NODE_FLAGS = ['--min-semi-space-size=16', '--max-semi-space-size=16'];
const WORKER_NODE_FLAGS = ['--min-semi-space-size=64', '--max-semi-space-size=64'];
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

// No Docker engine runs on the build machines, so `docker compose config` cannot; these checks hold the
// files to the same promises (test/ops/shutdown.test.ts runs their commands and signals them).
describe('deployment files', () => {
  it('docker-compose.yml runs node directly under an init, and persists Redis', () => {
    const compose = parse(read('docker-compose.yml'), { merge: true });
    expect(Object.keys(compose.services).sort()).toEqual(['mongo', 'redis', 'web', 'worker']);
    expect(compose.services.web.command).toEqual([
      'node',
      ...WEB_NODE_FLAGS,
      '--import',
      PRELOAD,
      'dist/src/server.js',
    ]);
    expect(compose.services.worker.command).toEqual([
      'node',
      ...WORKER_NODE_FLAGS,
      '--import',
      PRELOAD,
      'dist/workers/main.js',
    ]);
    for (const service of ['web', 'worker']) {
      expect(compose.services[service].build).toBe('.');
      expect(compose.services[service].init).toBe(true);
      expect(compose.services[service].environment.MONGO_URL).toMatch(/^mongodb:\/\/mongo:/);
      expect(compose.services[service].environment.REDIS_URL).toMatch(/^redis:\/\/redis:/);
      expect(Object.keys(compose.services[service].depends_on).sort()).toEqual(['mongo', 'redis']);
    }
    expect(compose.services.redis.command.join(' ')).toMatch(/--appendonly yes/);
    // npm is fine where the platform signals every process of the dyno (Heroku-style), not as a container's PID 1.
    expect(read('Procfile').trim().split('\n')).toEqual(['web: npm start', 'worker: npm run worker']);
    const { scripts } = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(scripts.start).toBe(['node', ...WEB_NODE_FLAGS, '--import', PRELOAD, 'dist/src/server.js'].join(' '));
    expect(scripts.worker).toBe(['node', ...WORKER_NODE_FLAGS, '--import', PRELOAD, 'dist/workers/main.js'].join(' '));
  });

  it('the Dockerfile is multi-stage on Node LTS, production dependencies only, non-root, node in exec form', () => {
    const dockerfile = read('Dockerfile');
    const stages = [...dockerfile.matchAll(/^FROM node:(\d+)\S* AS \w+$/gm)].map((match) => Number(match[1]));
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const major of stages) expect(major % 2, `node:${major} is an LTS line`).toBe(0);
    expect(semver.satisfies(`${stages[0]}.0.0`, JSON.parse(read('package.json')).engines.node)).toBe(true);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER (?!root)\w+/m);
    expect(dockerfile).toMatch(/COPY --from=build/);
    expect(dockerfile).toMatch(
      /^CMD \["node", "--min-semi-space-size=16", "--max-semi-space-size=16", "--import", "\.\/dist\/src\/telemetry\/preload\.js", "dist\/src\/server\.js"\]$/m,
    );
  });

  it('every locked dependency installs on each Node line the engines field admits', () => {
    const range = JSON.parse(read('package.json')).engines.node as string;
    const lines = ['20.19.0', '22.13.0', '24.0.0', '26.0.0'];
    for (const version of lines) expect(semver.satisfies(version, range), `${version} in ${range}`).toBe(true);
    expect(semver.satisfies('20.18.0', range)).toBe(false);
    const lock = JSON.parse(read('package-lock.json')) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const refusing = Object.entries(lock.packages).flatMap(([name, entry]) => {
      const wanted = !Array.isArray(entry.engines) ? entry.engines?.node : undefined;
      return wanted
        ? lines.filter((version) => !semver.satisfies(version, wanted)).map((v) => `${name} ${wanted} ${v}`)
        : [];
    });
    expect(refusing).toEqual([]);
  });

  it('is licensed Apache-2.0 in LICENSE, package.json and the OpenAPI document', () => {
    expect(read('LICENSE')).toMatch(/^\s*Apache License\s+Version 2\.0, January 2004/);
    expect(JSON.parse(read('package.json')).license).toBe('Apache-2.0');
    expect(read('src/api/openapi.ts')).toContain("{ name: 'Apache-2.0', identifier: 'Apache-2.0' }"); // both documents: test/ops/observability.test.ts
  });
});
