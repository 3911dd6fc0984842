import { defineConfig } from 'tsup';

export default defineConfig({
  // min-calibration-rows: one constant that svc-server's help names, without loading the check (index).
  entry: { index: 'src/index.ts', 'eval-cli': 'src/eval-cli.ts', 'min-calibration-rows': 'src/min-calibration-rows.ts' },
  format: ['esm'],
  dts: { entry: { index: 'src/index.ts', 'min-calibration-rows': 'src/min-calibration-rows.ts' } },
  target: 'node20',
  clean: true,
  sourcemap: true,
});
