import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts', 'src/openapi.ts', 'src/delivery-list-query.ts', 'src/quoted.ts', 'src/audit-event.ts'],
  format: ['esm'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
});
