import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts', 'src/web.ts', 'src/fetch.ts', 'src/express.ts', 'src/fastify.ts'],
  format: ['esm', 'cjs'],
  // One copy of shared modules per format, so an error thrown by an adapter is instanceof the class
  // exported from the main entry.
  splitting: true,
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
  platform: 'node',
  removeNodeProtocol: false,
});
