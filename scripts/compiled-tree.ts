import { copyFileSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';

export const REPO_ROOT = new URL('..', import.meta.url).pathname;

let tree: Promise<string> | undefined;

/**
 * The production tree (`dist/src`, `dist/workers`, as `npm run build` lays it out) in a directory of
 * its own, so entry points run as `node dist/...` from the layout the Dockerfile and compose start them from.
 * Transpiled with esbuild (seconds) rather than tsc (a minute on a busy machine); `npm test` type-checks.
 * Tests and the soak start their service processes from it: under tsx each start also transpiled or
 * hashed the sources and ran tsx's loader thread, about 1.5 s more CPU per process on a slow machine.
 */
export function compiledTree(): Promise<string> {
  tree ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'prs-dist-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const sources = ['src', 'workers'].flatMap((folder) =>
      readdirSync(join(REPO_ROOT, folder), { recursive: true, encoding: 'utf8' })
        .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts') && !file.endsWith('.d.ts'))
        .map((file) => join(REPO_ROOT, folder, file)),
    );
    await build({
      entryPoints: sources,
      outdir: join(dir, 'dist'),
      outbase: REPO_ROOT,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      logLevel: 'silent',
    });
    copyFileSync(join(REPO_ROOT, 'package.json'), join(dir, 'package.json'));
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
    return dir;
  })();
  return tree;
}
