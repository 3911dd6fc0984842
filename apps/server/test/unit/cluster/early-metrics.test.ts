import cluster from 'node:cluster';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { AggregatorRegistry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * A process of a multi-process server that is still starting (a replacement of a crashed one: its modules load
 * for a second or more) is already connected, so the primary's /metrics asks it too; it must answer, or every
 * scrape during a restart fails after prom-client's 5 s ('Operation timed out').
 */

const dir = mkdtempSync(join(tmpdir(), 'svc-early-metrics-'));

afterAll(() => {
  for (const worker of Object.values(cluster.workers ?? {})) worker?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('a server process still starting', () => {
  it("answers the primary's request for metrics with none", async () => {
    // early.ts alone, as a starting process has it: the rest of the server never loads here.
    const entry = join(dir, 'starting.cjs');
    await build({
      stdin: { contents: `import ${JSON.stringify(fileURLToPath(new URL('../../../src/cluster/early.ts', import.meta.url)))}; setInterval(() => {}, 1000);`, resolveDir: dir, loader: 'ts' },
      bundle: true,
      platform: 'node',
      format: 'cjs',
      outfile: entry,
      logLevel: 'silent',
    });
    cluster.setupPrimary({ exec: entry, silent: true });
    const worker = cluster.fork();
    await new Promise<void>((resolve) => worker.on('message', (m: { svc?: string }) => m?.svc === 'early' && resolve()));
    const text = await new AggregatorRegistry().clusterMetrics();
    expect(text.trim()).toBe('');
    worker.kill('SIGKILL');
  });
});
