import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // expect.poll waits for a browser or a server to get somewhere, and returns as soon as it has: its 1 s default
    // is shorter than a password hash or a page render takes on a loaded host (CI runs two suites side by side).
    expect: { poll: { timeout: 15_000 } },
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
