import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts', 'eval-cli': 'src/eval-cli.ts' },
  format: ['esm'],
  dts: { entry: { index: 'src/index.ts' } },
  target: 'node20',
  clean: true,
  sourcemap: true,
});
