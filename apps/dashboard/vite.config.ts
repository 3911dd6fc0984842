import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// Served by @svc/server at /dashboard; `vite` (dev) proxies the API to a server on :8080.
export default defineConfig({
  base: '/dashboard/',
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false },
  server: { proxy: { '/dashboard/api': 'http://127.0.0.1:8080' } },
});
