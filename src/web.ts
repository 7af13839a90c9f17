import { buildApp } from './app.js';
import { ensureIndexes } from './repositories.js';
import { startMetricsListener } from './shared/metrics-listener.js';
import type { App, AppDeps } from './app.js';

/**
 * Starts the web process on PORT/HOST (indexes first, idempotently), and its /metrics on METRICS_PORT
 * when set; shared by `npm start` and `npm run dev`. Closing the app closes both.
 */
export async function startWeb(deps: AppDeps): Promise<App> {
  await ensureIndexes(deps.db, deps.logger);
  const app = await buildApp(deps);
  if (deps.config.METRICS_PORT !== undefined) {
    const metrics = await startMetricsListener(deps.config.METRICS_PORT, deps.config.HOST);
    app.addHook('onClose', async () => {
      metrics.closeAllConnections();
      await new Promise((resolve) => metrics.close(resolve));
    });
  }
  await app.listen({ port: deps.config.PORT, host: deps.config.HOST });
  return app;
}
