import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // The second writes failures where .ci/run prints them last (see scripts/failure-reporter.mjs).
    reporters: ['default', '../../scripts/failure-reporter.mjs'],
    // Property tests run hundreds of checks: seconds on an idle host, several times that on a loaded one (CI runs
    // builds beside them). A test's time is not what it asserts, so the bound only catches a hang.
    testTimeout: 60_000,
  },
});
