import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // The tests spawn the built CLI and real servers; one file at a time keeps a shared 2-core box responsive.
    fileParallelism: false,
  },
});
