import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { freePort } from '../../src/dev/redis-server.js';
import { startWeb } from '../../src/web.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { expectProblem } from '../helpers/fixtures.js';

/** Issue 16: /metrics of the web process is not public on the API port (DECISIONS.md section 12.4). */
let env: TestEnv;
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';

beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(async () => env?.close());

describe('/metrics of the web process', () => {
  it('with METRICS_TOKEN, requires it as a bearer token on the API port', async () => {
    const app = await buildApp({ config: { ...env.config, METRICS_TOKEN }, db: env.db, redis: env.redis });
    try {
      const anonymous = await app.inject({ method: 'GET', url: '/metrics' });
      expectProblem(anonymous, 401, 'unauthorized');
      expect(anonymous.headers['www-authenticate']).toBe('Bearer');
      const wrong = await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer nope' } });
      expectProblem(wrong, 401, 'unauthorized');
      const allowed = await app.inject({
        method: 'GET',
        url: '/metrics',
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      });
      expect(allowed.statusCode).toBe(200);
      expect(allowed.body).toContain('http_request_duration_seconds');
    } finally {
      await app.close();
    }
  });

  it('with METRICS_PORT, is served there and not on the API port; closing the app closes both', async () => {
    const metricsPort = await freePort();
    const app = await startWeb({
      config: { ...env.config, PORT: 0, HOST: '127.0.0.1', METRICS_PORT: metricsPort, METRICS_TOKEN },
      db: env.db,
      redis: env.redis,
    });
    const apiPort = (app.server.address() as { port: number }).port;
    try {
      const onApiPort = await fetch(`http://127.0.0.1:${apiPort}/metrics`, {
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      });
      expect(onApiPort.status).toBe(404);
      expect(onApiPort.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      await onApiPort.text();
      expect((await fetch(`http://127.0.0.1:${apiPort}/healthz`)).status).toBe(200);

      const onMetricsPort = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      expect(onMetricsPort.status).toBe(200);
      expect(onMetricsPort.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await onMetricsPort.text()).toMatch(/http_request_duration_seconds_bucket\{[^}]*route="\/healthz"/);
      const elsewhere = await fetch(`http://127.0.0.1:${metricsPort}/healthz`);
      expect(elsewhere.status).toBe(404);
      await elsewhere.text();
    } finally {
      await app.close();
    }
    await expect(fetch(`http://127.0.0.1:${metricsPort}/metrics`)).rejects.toThrow();
  });

  it('METRICS_TOKEN shorter than 16 characters is a configuration error', async () => {
    const { loadConfig } = await import('../../src/shared/config.js');
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(
      'Invalid configuration: METRICS_TOKEN: expected at least 16 characters',
    );
  });
});
