import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AuditPayloadSchema } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './support/test-server.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

/**
 * An upstream that answers well-formed completions with token counts no answer has (svc counts the tokens
 * itself, as when an upstream sends none, so the client, the usage view and the webhook payload see real counts),
 * streams more than any answer is (refused past 32 MiB, as a plain answer is), or answers with headers past what
 * svc reads (an invalid answer, not a lost connection).
 */

/** 34 frames of 1 MiB of text: past the 32 MiB an answer may have. */
const BIG_FRAMES = 34;
const MIB_OF_TEXT = 'blue sky '.repeat(116_509).slice(0, 1024 * 1024);

const ABSURD_USAGE = { prompt_tokens: 1e308, completion_tokens: -5, total_tokens: 1e23 };

let upstream: Server;
let upstreamUrl: string;
let receiver: Receiver;
let server: TestServer;
let token: string;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d));
    req.on('end', () => {
      const body = JSON.parse(raw) as { stream?: boolean; messages: Array<{ content: string }> };
      const stream = body.stream === true;
      const base = { id: 'x', created: 1, model: 'm' };
      const frame = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
      if (body.messages.at(-1)?.content === 'Big headers.') {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        for (let i = 0; i < 2000; i++) headers[`x-filler-${i}`] = 'v'.repeat(100);
        res.writeHead(200, headers);
        res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi.' }, finish_reason: 'stop' }] }));
        return;
      }
      if (body.messages.at(-1)?.content === 'Say it all.') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const big = frame({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: MIB_OF_TEXT }, finish_reason: null }] });
        let sent = 0;
        const more = (): void => {
          while (sent < BIG_FRAMES) {
            sent++;
            if (!res.write(big)) return void res.once('drain', more);
          }
          res.write(frame({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
          res.end('data: [DONE]\n\n');
        };
        res.on('error', () => {});
        res.on('close', () => (sent = BIG_FRAMES + 1));
        more();
        return;
      }
      if (!stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'The sky is blue.' }, finish_reason: 'stop' }], usage: ABSURD_USAGE }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(frame({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: 'The sky is blue.' }, finish_reason: null }] }));
      res.write(frame({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
      res.write(frame({ ...base, object: 'chat.completion.chunk', choices: [], usage: ABSURD_USAGE }));
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  receiver = await startReceiver();
  server = await startTestServer({ env: { SVC_UPSTREAM_BASE_URL: upstreamUrl } });
  ({ token } = await server.createKey({ webhookUrl: receiver.url }));
});

afterAll(async () => {
  await server?.close();
  await receiver?.close();
  await new Promise((resolve) => upstream?.close(resolve));
});

function isCount(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

async function ask(stream: boolean, content = 'What colour is the sky? The sky is blue.'): Promise<{ status: number; text: string }> {
  const response = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', stream, ...(stream ? { stream_options: { include_usage: true } } : {}), messages: [{ role: 'user', content }] }),
  });
  return { status: response.status, text: await response.text() };
}

describe('an upstream with absurd token counts', () => {
  it('a plain answer carries counted usage, and its webhook payload parses', async () => {
    const before = receiver.received.length;
    const { status, text } = await ask(false);
    expect(status).toBe(200);
    const usage = (JSON.parse(text) as { usage: Record<string, unknown> }).usage;
    expect(isCount(usage.prompt_tokens) && isCount(usage.completion_tokens) && isCount(usage.total_tokens), JSON.stringify(usage)).toBe(true);
    expect(usage.total_tokens).toBe((usage.prompt_tokens as number) + (usage.completion_tokens as number));
    const [delivery] = (await receiver.waitFor((r) => r.length > before)).slice(before);
    const payload = AuditPayloadSchema.parse(JSON.parse(delivery!.raw.toString('utf8')));
    expect(payload.status_code).toBe(200);
    expect(payload.total_tokens).toBe(usage.total_tokens);
  });

  it('a stream ends with its answer and a counted usage chunk, not an error', async () => {
    const { status, text } = await ask(true);
    expect(status).toBe(200);
    const frames = text.split('\n\n').filter((f) => f.startsWith('data: ')).map((f) => f.slice(6));
    expect(frames.at(-1)).toBe('[DONE]');
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f) as { error?: unknown; usage?: Record<string, unknown> | null });
    expect(chunks.find((c) => c.error !== undefined)).toBeUndefined();
    const usage = chunks.at(-1)!.usage!;
    expect(isCount(usage.prompt_tokens) && isCount(usage.completion_tokens) && isCount(usage.total_tokens), JSON.stringify(usage)).toBe(true);
  });
});

describe('an upstream streaming more than an answer may have', () => {
  it('the stream ends with upstream_invalid_response past 32 MiB, and its delivery stays within what receivers take', { timeout: 120_000 }, async () => {
    const before = receiver.received.length;
    const { status, text } = await ask(true, 'Say it all.');
    expect(status).toBe(200);
    const frames = text.split('\n\n').filter((f) => f.startsWith('data: ')).map((f) => f.slice(6));
    expect(frames).not.toContain('[DONE]');
    expect(JSON.parse(frames.at(-1)!)).toMatchObject({ error: { code: 'upstream_invalid_response', type: 'upstream_error' } });
    const [delivery] = (await receiver.waitFor((r) => r.length > before)).slice(before);
    // @svc/verify's adapters (and svc-cli listen) take deliveries up to 64 MiB.
    expect(delivery!.raw.length).toBeLessThanOrEqual(64 * 1024 * 1024);
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
  });
});

describe('an upstream answering with 200 KB of headers', () => {
  it('is an invalid response (502 upstream_invalid_response), not a lost connection', async () => {
    for (const stream of [false, true]) {
      const { status, text } = await ask(stream, 'Big headers.');
      expect(status).toBe(502);
      expect(JSON.parse(text)).toMatchObject({ error: { code: 'upstream_invalid_response', type: 'upstream_error', param: null } });
    }
  });
});
