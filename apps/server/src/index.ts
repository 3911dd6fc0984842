export { createApp, createRequestListener, type AppDeps } from './app.js';
export { startServer, type RunningServer, type StartOptions } from './server.js';
export { loadConfig, type Config } from './config.js';
export { startFakeUpstream } from './test-support/fake-upstream.js';
export { startTestServer } from './test-support/test-server.js';
