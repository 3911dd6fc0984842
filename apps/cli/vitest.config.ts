import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The second writes failures where .ci/run prints them last (see scripts/failure-reporter.mjs).
    reporters: ['default', '../../scripts/failure-reporter.mjs'],
    include: ['test/**/*.test.ts'],
    // A guard against a hung test, not a measure: at load 15 on 2 cores (the server's suite beside this one) a
    // listen took over 10 s to start and 13 tests that start servers and CLIs ran past 30 s (as the server's did).
    testTimeout: 120_000,
    hookTimeout: 120_000,
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // The tests spawn the built CLI and real servers and mostly wait on them: two files at a time, as the server's
    // suite runs (npm test runs one package's suite at a time, so two is all the box carries).
    fileParallelism: true,
    maxWorkers: 2,
  },
});
