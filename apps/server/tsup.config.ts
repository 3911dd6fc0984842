import { defineConfig } from 'tsup';

export default defineConfig({
  // The grounding worker is an entry of its own: grounding-thread.ts starts it from dist/grounding-worker.js.
  entry: { bin: 'src/bin.ts', index: 'src/index.ts', 'grounding-worker': 'src/chat/grounding-worker.ts' },
  format: ['esm'],
  // Kysely's package is some 260 small ES modules: node resolving, reading and linking them one by one was about
  // 0.15 s of CPU in every svc-server command (each admin command, each start). Bundled, what svc uses of it is
  // part of one file here, loaded in about 0.01 s.
  noExternal: ['kysely'],
  dts: false,
  sourcemap: true,
  clean: true,
  target: 'node20',
  banner: { js: '' },
});
