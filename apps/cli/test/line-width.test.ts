import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startListener, type Listener } from '../src/listener.js';
import { lineWidth, processIo, type Io, type StreamInfo } from '../src/output.js';
import { postDelivery, samplePayload, SECRET } from './deliveries-fixture.js';
import { tempDir } from './cli-process.js';

const REQUEST_ID = 'chatcmpl-SbiDuglI8rT2vXz9QkLmNoPqRsTuVwXy';
const DELIVERY_ID = 'whd_0193a1b2c3d4e5f60718293a4b5c6d7e';
const WHOLE = `--> llm.request.completed [${REQUEST_ID}]  svc01 200 · 12+34=46 tokens · 532 ms · not grounded (hallucination 0.25) · test · signature ✔  ${DELIVERY_ID}\n`;

/** An Io capturing both streams; `streams` says what they are (none: pipes, as a test's capture is). */
function capture(streams?: { out: StreamInfo; err: StreamInfo }): Io & { written: { out: string; err: string } } {
  const written = { out: '', err: '' };
  return { out: (t) => void (written.out += t), err: (t) => void (written.err += t), streams, written };
}

const terminal = (columns?: number): StreamInfo => ({ isTTY: true, columns });
const pipe: StreamInfo = { isTTY: false };

describe('lineWidth: a terminal is fitted, anything else is printed whole', () => {
  it.each([
    ['no streams (a capturing Io)', undefined, undefined],
    ['a pipe or a file', { out: pipe, err: terminal(120) }, undefined],
    ['a terminal 120 columns wide', { out: terminal(120), err: pipe }, 120],
    ['a terminal that does not say its width', { out: terminal(), err: pipe }, 80],
    ['a terminal of width 0 (no size set)', { out: terminal(0), err: pipe }, 80],
  ])('%s', (_name, streams, expected) => {
    expect(lineWidth(capture(streams), 'out')).toBe(expected);
  });

  it('processIo reads process.stdout and process.stderr', () => {
    expect(processIo.streams?.out).toBe(process.stdout);
    expect(processIo.streams?.err).toBe(process.stderr);
  });
});

describe('listen lines, in-process', () => {
  let dir: ReturnType<typeof tempDir> | undefined;
  let listener: Listener | undefined;
  afterEach(async () => {
    await listener?.close();
    listener = undefined;
    dir?.remove();
  });

  async function receive(io: Io, options: { wide?: boolean; json?: boolean } = {}): Promise<void> {
    dir = tempDir();
    listener = await startListener({ host: '127.0.0.1', port: 0, path: '/', secret: SECRET, json: options.json === true, wide: options.wide, logFile: join(dir.path, 'log.jsonl'), io });
    expect((await postDelivery(listener.url, samplePayload(REQUEST_ID), { secret: SECRET, deliveryId: DELIVERY_ID })).status).toBe(200);
  }

  it('to a stream that is not a terminal: the whole line, full request id and every detail', async () => {
    const io = capture({ out: pipe, err: pipe });
    await receive(io);
    expect(io.written.out).toMatch(/^\d\d:\d\d:\d\d {2}/);
    expect(io.written.out.slice(10)).toBe(WHOLE);
  });

  it('an Io without streams is not a terminal either', async () => {
    const io = capture();
    await receive(io);
    expect(io.written.out.slice(10)).toBe(WHOLE);
  });

  it('to an 80-column terminal: fitted to 80 columns, the request id cut', async () => {
    const io = capture({ out: terminal(80), err: pipe });
    await receive(io);
    expect(io.written.out.slice(10)).toBe('--> llm.request.completed [chatcm…]  200 · not grounded · test · sig ✔\n');
    expect(io.written.out.trimEnd().length).toBeLessThanOrEqual(80);
  });

  it.each([
    [120, '--> llm.request.completed [chatcmpl-SbiDuglI8rT2vXz9QkL…]  200 · 46 tok · 532 ms · not grounded · test · sig ✔\n'],
    [140, `--> llm.request.completed [${REQUEST_ID}]  200 · 46 tok · 532 ms · not grounded · test · sig ✔\n`],
  ])('to a terminal %i columns wide: fitted to its columns', async (columns, expected) => {
    const io = capture({ out: terminal(columns), err: pipe });
    await receive(io);
    expect(io.written.out.slice(10)).toBe(expected);
    expect(io.written.out.trimEnd().length).toBeLessThanOrEqual(columns);
  });

  it('--wide on a terminal: the whole line', async () => {
    const io = capture({ out: terminal(80), err: pipe });
    await receive(io, { wide: true });
    expect(io.written.out.slice(10)).toBe(WHOLE);
  });

  it('--json: the human line goes to stderr and follows stderr (a terminal there fits it, a pipe does not)', async () => {
    const onTerminal = capture({ out: pipe, err: terminal(80) });
    await receive(onTerminal, { json: true });
    expect(onTerminal.written.err).toContain('--> llm.request.completed [chatcm…]  200 · not grounded · test · sig ✔\n');
    await listener!.close();
    listener = undefined;
    dir?.remove();

    const piped = capture({ out: terminal(80), err: pipe });
    await receive(piped, { json: true });
    expect(piped.written.err).toContain(WHOLE);
    expect(piped.written.out).toContain(`"request_id":"${REQUEST_ID}"`);
  });
});
