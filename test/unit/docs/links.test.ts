/**
 * The documentation holds together: every relative link in README.md, BENCHMARKS.md and docs/*.md reaches a file
 * that exists and, for a link with `#anchor` into a Markdown page, a heading of that page (anchors as GitHub makes
 * them). The alarms' runbook links are checked in test/unit/infra/serverless-package.test.ts ("alarms and the runbook").
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { headingAnchors, isExternal, markdownLinks } from '#test/support/markdown.ts';

const root = resolve(import.meta.dirname, '../../..');

const pages = ['README.md', 'BENCHMARKS.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];

/** The problems of one page's links: a missing file, or an anchor no heading of the target has. */
function brokenLinks(page: string, text: string, readPage: (path: string) => string | undefined): string[] {
  const problems: string[] = [];
  for (const { target, line } of markdownLinks(text)) {
    if (isExternal(target)) continue;
    const [pathPart, anchor] = target.split('#') as [string, string | undefined];
    const path = pathPart === '' ? page : relative(root, resolve(root, dirname(page), decodeURIComponent(pathPart)));
    const where = `${page}:${line}: ${target}`;
    const content = readPage(path);
    if (content === undefined) {
      problems.push(`${where} (no file ${path})`);
      continue;
    }
    if (anchor !== undefined && path.endsWith('.md') && !headingAnchors(content).includes(anchor)) problems.push(`${where} (no heading #${anchor} in ${path})`);
  }
  return problems;
}

const readFromRepo = (path: string): string | undefined => {
  const full = join(root, path);
  if (!existsSync(full)) return undefined;
  return statSync(full).isDirectory() ? '' : readFileSync(full, 'utf8');
};

describe('links in README.md and docs/', () => {
  it.each(pages)('%s: every relative link reaches a file and a heading that exist', (page) => {
    expect(brokenLinks(page, readFileSync(join(root, page), 'utf8'), readFromRepo)).toEqual([]);
  });

  it('README.md stays a front door (about 300 lines)', () => {
    expect(readFileSync(join(root, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(320);
  });
});

describe('the link check itself', () => {
  const pagesOf = (files: Record<string, string>) => (path: string): string | undefined => files[path];

  it('reports a missing file, a missing anchor and a link out of a subfolder that does not go up', () => {
    const files = { 'docs/a.md': '# A\n\n## Two words\n', 'docs/b.md': '# B\n' };
    const text = ['[ok](b.md)', '[ok](a.md#two-words)', '[ok](#two-words)', '[gone](c.md)', '[no anchor](b.md#nowhere)', '[wrong base](docs/b.md)', '[web](https://example.com/x)'].join('\n');
    expect(brokenLinks('docs/a.md', files['docs/a.md'] + text, pagesOf(files))).toEqual([
      'docs/a.md:7: c.md (no file docs/c.md)',
      'docs/a.md:8: b.md#nowhere (no heading #nowhere in docs/b.md)',
      'docs/a.md:9: docs/b.md (no file docs/docs/b.md)',
    ]);
  });

  it('ignores links in code, reports a missing page, and makes anchors as GitHub does', () => {
    const text = '```\n[x](missing.md)\n```\n`[y](missing.md)` [side by side](side-by-side.md)\n';
    expect(brokenLinks('docs/a.md', text, pagesOf({}))).toEqual(['docs/a.md:4: side-by-side.md (no file docs/side-by-side.md)']);
    expect(headingAnchors('# `npm start`\n## Fleets: what grows with what\n## I want to…\n## Limits\n## Limits\n```\n# not a heading\n```\n## [Deploy](x.md) **now**')).toEqual([
      'npm-start',
      'fleets-what-grows-with-what',
      'i-want-to',
      'limits',
      'limits-1',
      'deploy-now',
    ]);
  });
});
