import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import apiReference from '@scalar/fastify-api-reference';
import type { FastifyInstance } from 'fastify';

/** Scalar's own placeholder for a key ("ALL YOUR BASE ARE BELONG TO US" in base64), baked into its bundle. */
const SCALAR_KEY_PLACEHOLDER = '"QUxMIFlPVVIgQkFTRSBBUkUgQkVMT05HIFRPIFVT"';

/** The renderer's bundle, as the plugin ships it (read once, at the first request for it). */
let bundle: string | undefined;
function rendererBundle(): string {
  const entry = createRequire(import.meta.url).resolve('@scalar/fastify-api-reference');
  bundle ??= readFileSync(join(dirname(entry), 'js', 'standalone.js'), 'utf8');
  return bundle;
}

/** What goes in an API key field (the admin page's bearer field says "Token" on its own). */
const KEY_PLACEHOLDER = 'prk_... (an API key)';

const RENDERER_PATH = '/docs/js/reference.js';

const PAGES = [
  {
    prefix: '/docs',
    document: '/v1/ext/openapi.json',
    pageTitle: 'Pipeline Records API reference',
    security: 'ApiKeyAuth',
  },
  {
    prefix: '/docs/admin',
    document: '/v1/admin/openapi.json',
    pageTitle: 'Pipeline Records admin API reference',
    security: 'AdminToken',
  },
] as const;

/**
 * `/docs` and `/docs/admin`: the Scalar reference of each OpenAPI document, titled after the product and
 * loading nothing from another host (no web fonts: the page uses the system's), the key field hinting
 * at what goes in it. Each document's description links to the other page.
 */
export async function registerReferencePages(app: FastifyInstance): Promise<void> {
  let served: string | undefined;
  app.get(RENDERER_PATH, { schema: { hide: true } }, async (_request, reply) => {
    served ??= rendererBundle().replaceAll(SCALAR_KEY_PLACEHOLDER, JSON.stringify(KEY_PLACEHOLDER));
    return reply
      .type('application/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=3600')
      .send(served);
  });
  for (const page of PAGES) {
    await app.register(apiReference, {
      routePrefix: page.prefix,
      configuration: {
        url: page.document,
        pageTitle: page.pageTitle,
        title: page.pageTitle,
        cdn: RENDERER_PATH,
        withDefaultFonts: false,
        authentication: { preferredSecurityScheme: page.security },
      },
    });
  }
}
