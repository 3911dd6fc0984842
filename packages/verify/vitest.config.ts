import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The second writes failures where .ci/run prints them last (see scripts/failure-reporter.mjs).
    reporters: ['default', '../../scripts/failure-reporter.mjs'],
    include: ['src/**/*.test.ts'],
    // Bounds a hang, not a test's speed: CI runs builds beside the suites.
    testTimeout: 30_000,
    typecheck: { enabled: true, include: ['src/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      // index.ts and web.ts only re-export; they hold no statements to cover.
      exclude: ['src/**/*.test.ts', 'src/**/*.test-d.ts', 'src/index.ts', 'src/web.ts'],
      thresholds: { lines: 100, branches: 100, functions: 100, statements: 100 },
    },
  },
});
