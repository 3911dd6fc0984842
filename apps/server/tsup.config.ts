import { defineConfig } from 'tsup';

export default defineConfig({
  // The grounding worker is an entry of its own: grounding-thread.ts starts it from dist/grounding-worker.js.
  entry: { bin: 'src/bin.ts', index: 'src/index.ts', 'grounding-worker': 'src/chat/grounding-worker.ts' },
  format: ['esm'],
  dts: false,
  sourcemap: true,
  clean: true,
  target: 'node20',
  banner: { js: '' },
});
