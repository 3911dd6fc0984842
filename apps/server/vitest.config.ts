import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The second writes failures where .ci/run prints them last (see scripts/failure-reporter.mjs).
    reporters: ['default', '../../scripts/failure-reporter.mjs'],
    include: ['test/**/*.test.ts'],
    // A guard against a hung test, not a measure: a test that starts a server process (1-2 s alone) took over 30 s on a
    // 2-core host running other suites beside this one, and failed on this guard alone (svc-server-bin's starts).
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // expect.poll waits for a browser or a server to get somewhere, and returns as soon as it has: its 1 s default
    // is shorter than a password hash or a page render takes on a loaded host (CI runs two suites side by side).
    expect: { poll: { timeout: 15_000 } },
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
