// A vitest reporter that writes each failed test, with the start of its error, to .test-failures/ at the
// repository's root. `npm test` runs the packages' suites one after another under turbo, so a failure early on
// scrolls out of what a CI log's tail shows; .ci/run prints these files last when the tests fail.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const MAX_ERROR_CHARS = 1_500;

function firstLines(error) {
  const stack = (error?.stack ?? '').split('\n').filter((line) => !line.includes('node_modules')).join('\n');
  const text = [error?.message ?? String(error), error?.diff ?? '', stack]
    .filter(Boolean)
    .join('\n')
    .replace(/\x1b\[[0-9;]*m/g, '');
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
}

export default class FailureReporter {
  onTestRunEnd(testModules, unhandledErrors) {
    const lines = [];
    for (const module of testModules) {
      const file = relative(root, module.moduleId);
      for (const error of module.errors()) lines.push(`✗ ${file} (the file itself)\n${firstLines(error)}`);
      for (const test of module.children.allTests()) {
        const result = test.result();
        if (result.state !== 'failed') continue;
        for (const error of result.errors ?? []) lines.push(`✗ ${file} > ${test.fullName}\n${firstLines(error)}`);
      }
    }
    for (const error of unhandledErrors) lines.push(`✗ unhandled error\n${firstLines(error)}`);
    if (lines.length === 0) return;
    const dir = join(root, '.test-failures');
    mkdirSync(dir, { recursive: true });
    const name = `${relative(root, process.cwd()).replaceAll('/', '-') || 'root'}-${process.pid}.txt`;
    writeFileSync(join(dir, name), `${lines.join('\n\n')}\n`);
  }
}
