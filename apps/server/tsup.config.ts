import { defineConfig } from 'tsup';

export default defineConfig({
  // The workers are entries of their own: grounding-thread.ts and json-parse-thread.ts start them from dist/.
  entry: { bin: 'src/bin.ts', index: 'src/index.ts', 'grounding-worker': 'src/chat/grounding-worker.ts', 'json-parse-worker': 'src/http/json-parse-worker.ts' },
  format: ['esm'],
  dts: false,
  sourcemap: true,
  clean: true,
  target: 'node20',
  banner: { js: '' },
});
