import { connect } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signWebhook } from '@svc/verify';
import { startListen, useSandbox } from './cli-process.js';
import { postDelivery, samplePayload, SECRET } from './deliveries-fixture.js';

/**
 * `svc-cli listen --secret` is a receiver anyone who finds its port can send anything. Fed hostile requests over a raw
 * socket (a megabyte request_id, event or model in a body that is not signed, ids and paths of kilobytes, headers past
 * node's 16 KB, timestamps such as 1e308, bodies that are not UTF-8 or are cut short, a content-type that lies), it
 * answers each with a 4xx (or node's 400/431; 200 without --secret, never a 500), prints at least one line for it
 * on a pipe, where lines are not cut to a terminal's width, none longer than MAX_LINE and none quoting more than 128 characters of a value sent, and takes the
 * next good delivery. Seeded (SVC_FUZZ_SEED explores others).
 */
const SEED = Number(process.env.SVC_FUZZ_SEED ?? 20261201);
const MAX_LINE = 1_000;
const QUOTED_CHARS = 128;

interface Raw {
  path: string;
  headers: Array<[string, string | Buffer]>;
  body: Buffer;
  /** `more`: declares more than it sends, then the sender gives up (closes its side). */
  framing: 'exact' | 'chunked' | 'more';
}

async function send(port: string, raw: Raw): Promise<number | null> {
  const parts: Buffer[] = [Buffer.from(`POST ${raw.path} HTTP/1.1\r\nhost: listen\r\nconnection: close\r\n`)];
  for (const [name, value] of raw.headers) parts.push(Buffer.from(`${name}: `), Buffer.from(value), Buffer.from('\r\n'));
  if (raw.framing === 'chunked') {
    parts.push(Buffer.from('transfer-encoding: chunked\r\n\r\n'));
    if (raw.body.length > 0) parts.push(Buffer.from(`${raw.body.length.toString(16)}\r\n`), raw.body, Buffer.from('\r\n'));
    parts.push(Buffer.from('0\r\n\r\n'));
  } else {
    parts.push(Buffer.from(`content-length: ${raw.body.length + (raw.framing === 'more' ? 10 : 0)}\r\n\r\n`), raw.body);
  }
  const socket = connect(Number(port), '127.0.0.1');
  socket.on('error', () => {});
  if (raw.framing === 'more') socket.end(Buffer.concat(parts));
  else socket.write(Buffer.concat(parts));
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  // Not events.once: it rejects on the 'error' (a reset) that comes before 'close'.
  await new Promise((resolve) => socket.on('close', resolve));
  const status = /^HTTP\/1\.1 (\d{3})/.exec(Buffer.concat(chunks).toString('latin1'))?.[1];
  return status === undefined ? null : Number(status);
}

const big = (char: string, length: number) => char.repeat(length);
const hostileBody = fc.oneof(
  fc.constantFrom('request_id', 'event', 'model', 'response_id').map((field) =>
    Buffer.from(samplePayload('chatcmpl-hostile').replace(/^\{/, `{"${field}":"${big('\u001b', 3)}${big('R', 1024 * 1024)}",`)),
  ),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
  fc.constantFrom(Buffer.alloc(0), Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(samplePayload('chatcmpl-plain'))),
);

const hostileArb = fc
  .record({
    body: hostileBody,
    spoil: fc.constantFrom('unsigned', 'wrong secret', 'stale', 'bad timestamp', 'x-svc-signature only'),
    timestamp: fc.constantFrom('1e308', '-1', '0x10', 'NaN', ' 1 ', big('9', 300)),
    id: fc.oneof(fc.constant(big('I', 8000)), fc.constantFrom('é中', '', ' '), fc.string({ minLength: 1, maxLength: 20 })),
    event: fc.constantFrom('llm.request.completed', big('E', 8000), '\u001b]0;pwned\u0007'),
    path: fc.constantFrom('/', '/', '/', `/${big('p', 8000)}`, '/%1b[2J'),
    contentType: fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'APPLICATION/JSON; charset=latin1'),
    framing: fc.constantFrom<Raw['framing']>('exact', 'chunked', 'more'),
    tooLarge: fc.constantFrom(false, false, false, true),
  })
  .map(({ body, spoil, timestamp, id, event, path, contentType, framing, tooLarge }): Raw & { sent: string[] } => {
    const now = Math.floor(Date.now() / 1000);
    const ts = spoil === 'stale' ? now - 3600 : now;
    const signedWith = spoil === 'wrong secret' ? 'whsec_wrong' : SECRET;
    const headers: Array<[string, string | Buffer]> = [
      ['Content-Type', contentType],
      ['X-Svc-Event', event],
      ['X-SVC-DELIVERY', Buffer.from(id)],
    ];
    if (spoil === 'x-svc-signature only') headers.push(['x-svc-signature', `sha256=${big('0', 64)}`]);
    else if (spoil !== 'unsigned') {
      headers.push(
        ['Webhook-Id', Buffer.from(id)],
        ['webhook-timestamp', spoil === 'bad timestamp' ? timestamp : String(ts)],
        ['WEBHOOK-SIGNATURE', signWebhook(body, { id: Buffer.from(id).toString('latin1').trim() || 'none', timestamp: ts }, signedWith)],
      );
    }
    // Past node's default 16 KB of headers: node itself answers 431.
    if (tooLarge) headers.push(['x-padding', big('P', 20_000)]);
    return { path, headers, body, framing, sent: [path, event, id, big('R', 1024), body.toString('latin1')] };
  });

describe('svc-cli listen fed hostile requests', () => {
  const sandbox = useSandbox();

  // Without --secret listen takes every delivery (200); an empty webhook-id or X-Svc-Delivery was answered 500.
  it.each([
    { mode: 'with --secret', args: ['--secret', SECRET], answers: [400, 401, 404, 413, 431] },
    { mode: 'without --secret', args: [], answers: [200, 400, 404, 413, 431] },
  ])('$mode: answers each with a 4xx (or 200 unchecked), prints bounded lines for it, and takes the next good delivery', { timeout: 180_000 }, async ({ args, answers }) => {
    const listen = await startListen(args, { cwd: sandbox.path });
    const port = new URL(listen.url).port;
    let good = 0;
    await fc.assert(
      fc.asyncProperty(hostileArb, async (raw) => {
        const before = { out: listen.stdout().length, err: listen.stderr().length };
        const status = await send(port, raw);
        if (status !== null) expect(answers).toContain(status);
        good++;
        const requestId = `chatcmpl-good-${good}`;
        const answer = await postDelivery(listen.url, samplePayload(requestId), { secret: SECRET, deliveryId: `whd_good_${good}` });
        expect(answer.status).toBe(200);
        await listen.waitFor('stdout', new RegExp(`\\[${requestId}\\]`));
        const printed = `${listen.stdout().slice(before.out)}${listen.stderr().slice(before.err)}`;
        const lines = printed.split('\n').filter((line) => line !== '');
        // The good delivery's line, and at least one for the hostile request.
        expect(lines.length, printed.slice(0, 2000)).toBeGreaterThanOrEqual(2);
        for (const line of lines) {
          expect(line.length, line.slice(0, 300)).toBeLessThanOrEqual(MAX_LINE);
          // eslint-disable-next-line no-control-regex
          expect(line).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
          for (const value of raw.sent) if (value.length > QUOTED_CHARS) expect(line).not.toContain(value.slice(0, QUOTED_CHARS + 1));
        }
      }),
      { seed: SEED + 20, numRuns: 40, endOnFailure: true },
    );
  });
});
