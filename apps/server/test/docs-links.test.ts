import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anchorsOf, brokenLinks } from './support/markdown-links.js';

// The README is the door to the reference pages under docs/: a link that leads nowhere strands the reader.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function docsFiles(root: string): string[] {
  const docs = join(root, 'docs');
  return [join(root, 'README.md'), ...readdirSync(docs).filter((f) => f.endsWith('.md')).sort().map((f) => join(docs, f))];
}

describe('links in README.md and docs/*.md', () => {
  it('every relative link and #anchor leads to a file and a heading that exist', () => {
    expect(brokenLinks(docsFiles(ROOT), ROOT).map((b) => `${b.file}:${b.line} ${b.link}: ${b.problem}`)).toEqual([]);
  });

  it('reports a missing file, a missing heading and a missing anchor in another page, and nothing in code', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-docs-links-'));
    try {
      mkdirSync(join(root, 'docs'));
      writeFileSync(
        join(root, 'README.md'),
        [
          '# svc',
          '## Quick start',
          'See [quick start](#quick-start), [the API](docs/api.md#errors) and [scaling](docs/scaling.md).',
          'Also [gone](docs/gone.md) and [nowhere](#no-such-section), `[in code](docs/none.md)`.',
          '```md',
          '[in a fence](docs/none.md)',
          '```',
          'Prose that names ```json and ```yaml fences opens none: [after it](docs/missing.md).',
          '[external](https://example.com/x.md#y) and [mail](mailto:a@example.com)',
        ].join('\n'),
      );
      writeFileSync(join(root, 'docs/api.md'), '# API\n## Errors\nBack to the [README](../README.md#quick-start), [headers](#error-headers).\n');
      const broken = brokenLinks(docsFiles(root), root);
      expect(broken.map((b) => [b.file, b.line, b.link, b.problem])).toEqual([
        ['README.md', 3, 'docs/scaling.md', 'no such file: docs/scaling.md'],
        ['README.md', 4, 'docs/gone.md', 'no such file: docs/gone.md'],
        ['README.md', 4, '#no-such-section', 'no heading #no-such-section in README.md'],
        ['README.md', 8, 'docs/missing.md', 'no such file: docs/missing.md'],
        ['docs/api.md', 3, '#error-headers', 'no heading #error-headers in docs/api.md'],
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("computes GitHub's anchors: punctuation dropped, code kept, repeats numbered", () => {
    const anchors = anchorsOf(
      ['## Grounding ("dehallucinate")', '### Memory and GC: V8 and glibc settings', "## `npm run bench:streams` (`streams.mjs`): a model's pace", '## Notes', '## Notes'].join('\n'),
    );
    expect([...anchors]).toEqual(['grounding-dehallucinate', 'memory-and-gc-v8-and-glibc-settings', 'npm-run-benchstreams-streamsmjs-a-models-pace', 'notes', 'notes-1']);
  });
});
