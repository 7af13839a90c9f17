import { createServer, type Server } from 'node:http';
import { metricsRegistry } from '../src/shared/metrics.js';

/** A worker's /metrics on METRICS_PORT (delivery outcomes, scan durations, process metrics). */
export async function startMetricsServer(port: number): Promise<Server> {
  const server = createServer(async (request, response) => {
    if (request.url !== '/metrics') {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': metricsRegistry.contentType }).end(await metricsRegistry.metrics());
  });
  await new Promise<void>((resolve) => server.listen(port, '0.0.0.0', resolve));
  return server;
}
