import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The second writes failures where .ci/run prints them last (see scripts/failure-reporter.mjs).
    reporters: ['default', '../../scripts/failure-reporter.mjs'],
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // The tests spawn the built CLI and real servers and mostly wait on them: two files at a time, as the server's
    // suite runs (npm test runs one package's suite at a time, so two is all the box carries).
    fileParallelism: true,
    maxWorkers: 2,
  },
});
