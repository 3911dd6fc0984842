// What `svc-server start` runs in one process, with StartOptions no setting gives (JSON in argv[2]; see
// startServerProcess's `startOptions`). It has no graceful stop: the tests that use it stop it with SIGKILL.
import { loadConfig, startServer } from '../../dist/index.js';

const running = await startServer(loadConfig(process.env), JSON.parse(process.argv[2] ?? '{}'));
process.stderr.write(`svc listening on ${running.url}\n`);
