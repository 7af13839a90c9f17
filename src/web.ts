import type { App } from './app.js';
import { buildApp, type AppDeps } from './app.js';
import { ensureIndexes } from './repositories.js';

/** Starts the web process on PORT/HOST (indexes first, idempotently); shared by `npm start` and `npm run dev`. */
export async function startWeb(deps: AppDeps): Promise<App> {
  await ensureIndexes(deps.db);
  const app = await buildApp(deps);
  await app.listen({ port: deps.config.PORT, host: deps.config.HOST });
  return app;
}
