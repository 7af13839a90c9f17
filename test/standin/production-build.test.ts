import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/**
 * Every module `npm start` and `npm run worker` load, following the runtime imports the build keeps (type-only
 * imports are erased by tsc), with the packages they name.
 */
function runtimeImportGraph(entries: string[]): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const pending = [...entries];
  while (pending.length) {
    const file = pending.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const source = read(file).replace(/^import type [^;]+;/gm, '');
    for (const [, specifier] of source.matchAll(
      /(?:^|\s)(?:import|export)\s[^;]*?from\s+'([^']+)'|import\('([^']+)'\)/g,
    )) {
      if (!specifier) continue;
      if (specifier.startsWith('.')) {
        const target = relative(root, join(root, dirname(file), specifier.replace(/\.js$/, '.ts')));
        expect(existsSync(join(root, target)), `${file} imports ${specifier}`).toBe(true);
        pending.push(target);
      } else {
        packages.add(
          specifier.startsWith('@')
            ? specifier.split('/').slice(0, 2).join('/')
            : (specifier.split('/')[0] ?? specifier),
        );
      }
    }
  }
  return { files, packages };
}

describe('the MongoDB stand-in is development tooling', () => {
  it('nothing the production processes load imports src/dev, mingo or bson', () => {
    const { files, packages } = runtimeImportGraph(['src/server.ts', 'workers/main.ts']);
    expect(files.size).toBeGreaterThan(50);
    expect([...files].filter((f) => f.startsWith('src/dev'))).toEqual([]);
    expect(packages.has('mongodb')).toBe(true);
    for (const name of ['mingo', 'bson', 'mongodb-memory-server-core']) expect(packages.has(name)).toBe(false);
  });

  it('package.json keeps the stand-in libraries in devDependencies; the build and the image leave src/dev out', () => {
    const pkg = JSON.parse(read('package.json'));
    for (const name of ['mingo', 'bson', 'mongodb-memory-server-core']) {
      expect(pkg.dependencies[name]).toBeUndefined();
      expect(pkg.devDependencies[name]).toBeDefined();
    }
    const build = JSON.parse(read('tsconfig.build.json'));
    expect(build.exclude).toEqual(expect.arrayContaining(['src/dev', 'src/dev.ts']));
    expect(read('.dockerignore').split('\n')).toEqual(expect.arrayContaining(['src/dev', 'src/dev.ts']));
  });
});
