// `npm install` of this package: builds the addon with node-gyp. With Node's headers installed beside the
// node binary (Debian's nodejs: /usr/include/node) they are used, so no header download is needed. A failed
// build is not an install failure: svc then runs on glibc's default malloc thresholds and says so in its log.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

const args = ['rebuild'];
const prefix = join(dirname(process.execPath), '..');
if (!process.env.npm_config_nodedir && existsSync(join(prefix, 'include/node/node_api.h'))) args.push(`--nodedir=${prefix}`);
const gyp = process.env.npm_config_node_gyp;
const result = gyp
  ? spawnSync(process.execPath, [gyp, ...args], { stdio: 'inherit' })
  : spawnSync('node-gyp', args, { stdio: 'inherit', shell: true });
if (result.status !== 0) {
  process.stderr.write("@svc/malloc-tune was not built (no C compiler or Node headers?): svc runs without it, on glibc's default malloc thresholds\n");
}
