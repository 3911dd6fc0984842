export { createRequestListener, type AppDeps } from './app.js';
export { startServer, type RunningServer, type StartOptions } from './server.js';
export { loadConfig, type Config } from './config.js';
