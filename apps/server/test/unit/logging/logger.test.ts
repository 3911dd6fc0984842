import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BatchedStderr, createLogger } from '../../../src/logging/logger.js';

/** A stream that records each write it gets. */
function recorder() {
  const out = new PassThrough();
  const writes: string[] = [];
  out.on('data', (d: Buffer) => writes.push(d.toString('utf8')));
  return { out, writes };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('BatchedStderr', () => {
  it('shared with other processes (atomic), never writes more than PIPE_BUF bytes of lines at once', async () => {
    const { out, writes } = recorder();
    const batch = new BatchedStderr(out, true);
    const line = `${'é'.repeat(99)}\n`; // 199 bytes in UTF-8
    for (let i = 0; i < 41; i++) batch.write(line);
    batch.flush();
    await tick();
    expect(writes.join('')).toBe(line.repeat(41));
    for (const write of writes) expect(Buffer.byteLength(write)).toBeLessThanOrEqual(4096);
    expect(writes[0]).toBe(line.repeat(20));
  });

  it('multi-process loggers put the pid on every line', async () => {
    const { out, writes } = recorder();
    createLogger('info', out, { multiProcess: true }).info('hello');
    await tick();
    expect(JSON.parse(writes[0]!)).toMatchObject({ service: 'svc', pid: process.pid, msg: 'hello' });
  });

  it('gathers lines until 4 KiB, then writes them in one write, in order', async () => {
    const { out, writes } = recorder();
    const batch = new BatchedStderr(out);
    const line = `${'x'.repeat(99)}\n`;
    for (let i = 0; i < 40; i++) batch.write(line);
    await tick();
    expect(writes).toEqual([]);
    for (let i = 0; i < 2; i++) batch.write(line);
    await tick();
    expect(writes).toEqual([line.repeat(41)]);
    batch.flush();
    await tick();
    expect(writes).toEqual([line.repeat(41), line]);
  });

  it('flush() with nothing gathered writes nothing', async () => {
    const { out, writes } = recorder();
    new BatchedStderr(out).flush();
    await tick();
    expect(writes).toEqual([]);
  });

  it.each([
    ['EPIPE', 'a closed pipe'],
    ['EIO', 'a hung-up terminal'],
  ])('drops lines once the reader is gone (%s: %s), and other errors still surface', (code, gone) => {
    const { out, writes } = recorder();
    const batch = new BatchedStderr(out);
    batch.write('before\n');
    out.emit('error', Object.assign(new Error(gone), { code }));
    batch.write('after\n');
    batch.flush();
    expect(writes).toEqual([]);
    expect(() => out.emit('error', Object.assign(new Error('disk full'), { code: 'ENOSPC' }))).toThrow('disk full');
  });

  it('takes pino lines: two log calls, one write after flush(), secrets redacted', async () => {
    const { out, writes } = recorder();
    const batch = new BatchedStderr(out);
    const logger = createLogger('info', batch as unknown as NodeJS.WritableStream);
    logger.info({ key: 'sk-secret', n: 1 }, 'one');
    logger.info({ n: 2 }, 'two');
    await tick();
    expect(writes).toEqual([]);
    batch.flush();
    await tick();
    expect(writes).toHaveLength(1);
    const lines = writes[0]!.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.msg, l.n, l.key])).toEqual([
      ['one', 1, '[redacted]'],
      ['two', 2, undefined],
    ]);
  });
});
