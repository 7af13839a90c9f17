import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const markdownFiles = ['README.md', ...readdirSync(join(root, 'docs')).map((name) => `docs/${name}`)].filter((file) =>
  file.endsWith('.md'),
);

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const [, heading = ''] of markdown.matchAll(/^#{1,6} (.+)$/gm)) {
    anchors.add(
      heading
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    );
  }
  return anchors;
}

// A clone must explain itself: no reader may need a file outside the repository.
describe('README and docs/', () => {
  it('link only to files inside the repository, and every relative link (and its anchor) exists', () => {
    const problems: string[] = [];
    for (const file of markdownFiles) {
      const text = readFileSync(join(root, file), 'utf8');
      for (const [, target = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:)/.test(target)) continue;
        const [path, anchor] = target.split('#');
        const resolved = path ? resolve(root, dirname(file), path) : join(root, file);
        if (relative(root, resolved).startsWith('..')) problems.push(`${file}: ${target} leaves the repository`);
        else if (!existsSync(resolved)) problems.push(`${file}: ${target} does not exist`);
        else if (anchor && resolved.endsWith('.md') && !anchorsOf(readFileSync(resolved, 'utf8')).has(anchor))
          problems.push(`${file}: ${target} names a missing heading`);
      }
      if (/\.\.\/shared\//.test(text)) problems.push(`${file}: mentions ../shared/`);
      // The contract the tests read (DECISIONS.md, the spec) is not in a clone: the docs say it in their own words.
      if (/DECISIONS(\.md)?\b/.test(text))
        problems.push(`${file}: refers to DECISIONS.md, which a clone does not have`);
    }
    expect(problems).toEqual([]);
  });

  it('the README keeps the two commands and links every docs/ page', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme).toContain('npm ci && npm run dev');
    expect(readme).toContain('npm ci && npm test');
    const unlinked = markdownFiles.filter((file) => file.startsWith('docs/') && !readme.includes(`](${file})`));
    expect(unlinked).toEqual([]);
  });

  it("the README's layout tree names every folder of src/ and no folder that is not there", () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const tree = /## Layout\n\n```\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const named = new Set([...tree.matchAll(/(?:^|\s)([a-z-]+)\//g)].map((match) => match[1]!));
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'dev')
      .map((entry) => entry.name);
    expect(folders.filter((folder) => !named.has(folder))).toEqual([]);
    const topLevel = new Set(['src', 'workers', 'sdk', 'test', 'bench', 'scripts', 'deploy', 'docs']);
    expect([...named].filter((name) => !folders.includes(name) && !topLevel.has(name))).toEqual([]);
  });
});
