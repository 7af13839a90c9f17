import { withoutRedaction, type Logger } from '../shared/logger.js';
import { httpRequestDuration } from '../shared/metrics.js';
import type { FastifyInstance } from 'fastify';

/**
 * One JSON log line per request (request id, company and key ids, never the key), and the request
 * duration histogram by route template (not raw URL, so ids do not explode the label set).
 */
export function registerRequestObservation(app: FastifyInstance): void {
  // The line's fields are fixed and none can hold a secret. reqId is the binding the request's own logger would add.
  const lines = withoutRedaction(app.log as Logger);
  // A callback hook, not an async one: no promise per request.
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const durationMs = reply.elapsedTime;
    httpRequestDuration.observe(
      { method: request.method, route, status_code: String(reply.statusCode) },
      durationMs / 1000,
    );
    // A server error is a warning, so it shows at LOG_LEVEL=warn too.
    lines[reply.statusCode >= 500 ? 'warn' : 'info'](
      {
        reqId: request.id,
        method: request.method,
        route,
        status: reply.statusCode,
        duration_ms: Math.round(durationMs * 10) / 10,
        company_id: request.auth?.companyId,
        key_id: request.auth?.keyId,
      },
      'request',
    );
    done();
  });
}
