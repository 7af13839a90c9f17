import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

// No Docker engine runs on the build machines, so `docker compose config` cannot; these checks hold the files to the same promises.
describe('deployment files', () => {
  it('docker-compose.yml starts mongo, redis, web and worker with the Procfile commands', () => {
    const compose = parse(read('docker-compose.yml'));
    expect(Object.keys(compose.services).sort()).toEqual(['mongo', 'redis', 'web', 'worker']);
    expect(compose.services.web.command).toEqual(['npm', 'start']);
    expect(compose.services.worker.command).toEqual(['npm', 'run', 'worker']);
    for (const service of ['web', 'worker']) {
      expect(compose.services[service].build).toBe('.');
      expect(compose.services[service].environment.MONGO_URL).toMatch(/^mongodb:\/\/mongo:/);
      expect(compose.services[service].environment.REDIS_URL).toMatch(/^redis:\/\/redis:/);
      expect(Object.keys(compose.services[service].depends_on).sort()).toEqual(['mongo', 'redis']);
    }
    expect(read('Procfile').trim().split('\n')).toEqual(['web: npm start', 'worker: npm run worker']);
  });

  it('the Dockerfile is multi-stage, installs production dependencies only and runs as a non-root user', () => {
    const dockerfile = read('Dockerfile');
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER (?!root)\w+/m);
    expect(dockerfile).toMatch(/COPY --from=build/);
  });
});
