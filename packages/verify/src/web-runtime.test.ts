import { build } from 'esbuild';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { signWebhook } from './index.js';
import { samplePayload } from '../test/support.js';

/**
 * The Web Crypto entries as a Cloudflare Worker, Vercel Edge or Deno would load them: bundled for no platform
 * (esbuild refuses any `node:` import then), and run where Node's globals (process, Buffer, require,
 * setImmediate…) are out of reach, with only Web APIs left: fetch's Request/Response, crypto.subtle, TextEncoder.
 */
async function bundle(source: string): Promise<string> {
  const resolveDir = new URL('.', import.meta.url).pathname;
  const result = await build({ stdin: { contents: source, resolveDir, loader: 'ts' }, bundle: true, platform: 'neutral', format: 'esm', write: false, logLevel: 'silent' });
  return result.outputFiles[0]!.text;
}

// Node's own Request and Response use its globals, so they stay; the bundle sees none of them: each is shadowed
// by a module-level binding, and the bundle must not reach them through globalThis either (checked below).
const NODE_GLOBALS = ['process', 'Buffer', 'require', 'module', 'global', 'setImmediate', 'clearImmediate', '__filename', '__dirname'];

function runWithWebApisOnly(code: string, input: unknown): Promise<unknown> {
  const shadowed = `const ${NODE_GLOBALS.map((name) => `${name} = undefined`).join(', ')};\n${code}`;
  const worker = new Worker(
    `
    const { parentPort, workerData } = require('node:worker_threads');
    import('data:text/javascript;base64,' + Buffer.from(workerData.code).toString('base64'))
      .then((module) => module.run(workerData.input))
      .then((result) => parentPort.postMessage({ result }), (error) => parentPort.postMessage({ error: String(error && error.stack || error) }));
    `,
    { eval: true, workerData: { code: shadowed, input } },
  );
  return new Promise((resolve, reject) => {
    worker.once('message', (message: { result?: unknown; error?: string }) => {
      void worker.terminate();
      if (message.error !== undefined) reject(new Error(message.error.slice(0, 2000)));
      else resolve(message.result);
    });
    worker.once('error', reject);
  });
}

describe('the Web Crypto entries in a runtime without Node APIs (Workers, Vercel Edge, Deno)', () => {
  const ID = 'whd_web';
  const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

  it('@svc/verify/web and @svc/verify/fetch bundle with no node: import and verify a delivery with Web APIs alone', async () => {
    const body = JSON.stringify({ ...samplePayload, request_id: 'web-1' });
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = { 'content-type': 'application/json', 'webhook-id': ID, 'webhook-timestamp': String(timestamp), 'webhook-signature': signWebhook(body, { id: ID, timestamp }, SECRET) };
    const entry = `
      import { verifyWebhook, constructWebhookEvent, createDeduper } from './web.ts';
      import { createWebhookHandler, verifyRequest, errorResponse, WebhookVerificationError } from './fetch.ts';
      export async function run({ body, headers, secret }) {
        const request = () => new Request('https://worker.example/webhooks/svc', { method: 'POST', headers, body });
        const handler = createWebhookHandler({ secret, dedupe: createDeduper() }, async (event) => Response.json({ got: event.request_id }));
        const first = await handler(request());
        const again = await handler(request());
        let refused;
        try { await verifyRequest(request(), 'whsec_' + secret.slice(7)); } catch (err) { refused = err instanceof WebhookVerificationError ? (await errorResponse(err).json()).error.code : String(err); }
        return {
          globals: [typeof process, typeof Buffer, typeof setImmediate],
          verified: await verifyWebhook(new TextEncoder().encode(body), new Headers(headers), secret),
          requestId: (await constructWebhookEvent(body, headers, [secret])).request_id,
          first: [first.status, await first.json()],
          again: [again.status, again.headers.get('svc-duplicate')],
          refused,
        };
      }`;
    const code = await bundle(entry);
    expect(code).not.toMatch(/from\s*["']node:|require\(["']node:/);
    expect(code).not.toMatch(new RegExp(`globalThis\\.(?:${NODE_GLOBALS.join('|')})\\b`));
    expect(await runWithWebApisOnly(code, { body, headers, secret: SECRET })).toEqual({
      globals: ['undefined', 'undefined', 'undefined'],
      verified: true,
      requestId: 'web-1',
      first: [200, { got: 'web-1' }],
      again: [200, 'true'],
      refused: 'signature_mismatch',
    });
  });

  it('esbuild refuses the Node build for such a runtime, so the check above would catch a node: import', async () => {
    const error = await bundle("export * from './index.ts';").then(
      () => undefined,
      (err: Error) => err,
    );
    expect(error?.message).toMatch(/node:crypto/);
  });
});
