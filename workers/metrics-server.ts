import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { metricsRegistry } from '../src/shared/metrics.js';
import type { RoleState } from './role.js';

export type DependencyState = 'ok' | 'down';

export interface WorkerProbes {
  /** MongoDB and Redis as this process sees them now (`down` until connected). */
  dependencies(): Promise<{ mongo: DependencyState; redis: DependencyState }>;
  /** Each configured role's state (`starting` until the roles run). */
  roles(): Record<string, RoleState>;
}

/**
 * A worker's operations server on METRICS_PORT: /metrics (delivery outcomes, scan durations, process
 * metrics), /healthz (liveness: 503 once a role's consumer stopped on its own, so an orchestrator
 * restarts the process) and /readyz (200 only while MongoDB and Redis answer and every role runs).
 */
export async function startMetricsServer(port: number, probes: WorkerProbes): Promise<Server> {
  const server = createServer((request, response) => void answer(request, response));
  async function answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const json = (status: number, body: unknown): void =>
      void response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    try {
      const path = request.url?.split('?')[0];
      if (request.method !== 'GET' && request.method !== 'HEAD') return void response.writeHead(405).end();
      if (path === '/metrics') {
        const text = await metricsRegistry.metrics();
        return void response.writeHead(200, { 'content-type': metricsRegistry.contentType }).end(text);
      }
      if (path === '/healthz') {
        const roles = probes.roles();
        const stopped = Object.values(roles).includes('stopped');
        return json(stopped ? 503 : 200, { status: stopped ? 'failing' : 'ok', roles });
      }
      if (path === '/readyz') {
        const roles = probes.roles();
        const dependencies = await probes.dependencies();
        const ready =
          dependencies.mongo === 'ok' &&
          dependencies.redis === 'ok' &&
          Object.values(roles).every((state) => state === 'running');
        if (!ready) response.setHeader('retry-after', '5');
        return json(ready ? 200 : 503, { ...dependencies, roles });
      }
      response.writeHead(404).end();
    } catch {
      if (!response.headersSent) response.writeHead(500).end();
    }
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
