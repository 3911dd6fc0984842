import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { parseCorsOrigins } from '../src/http/cors.js';
import { launchChromium, skipWithoutChromium } from './support/chromium.js';
import { startTestServer, type TestServer } from './support/test-server.js';

const APP = 'https://app.example.test';
/** What the openai SDK's browser build sends besides the key: its own `x-stainless-*` headers. */
const SDK_HEADERS = 'authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,x-stainless-retry-count';

const preflight = (url: string, origin: string) =>
  fetch(url, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': SDK_HEADERS },
  });

describe('CORS on the API (SVC_CORS_ORIGINS)', () => {
  let open: TestServer;
  let listed: TestServer;
  let token: string;

  beforeAll(async () => {
    open = await startTestServer();
    listed = await startTestServer({ env: { SVC_CORS_ORIGINS: `${APP}, http://localhost:5173` } });
    ({ token } = await open.createKey());
  });
  afterAll(async () => {
    await open?.close();
    await listed?.close();
  });

  it('answers a preflight without a key, allowing the headers asked for; the answer names the origin and exposes the rate limit', async () => {
    const res = await preflight(`${open.url}/v1/chat/completions`, APP);
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-headers')).toBe(SDK_HEADERS);
    expect(res.headers.get('access-control-allow-methods')).toContain('POST');
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();

    const chat = await fetch(`${open.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { origin: APP, authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc01', messages: [{ role: 'user', content: 'Hello' }] }),
    });
    expect(chat.status).toBe(200);
    expect(chat.headers.get('access-control-allow-origin')).toBe('*');
    expect(chat.headers.get('access-control-expose-headers')).toContain('x-ratelimit-remaining-requests');
    // An error answer carries it too: the page can read why it was refused.
    const refused = await fetch(`${open.url}/v1/models`, { headers: { origin: APP } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('gives the dashboard (cookie sessions) none of it, and no request without an Origin', async () => {
    const dashboard = await fetch(`${open.url}/dashboard/api/me`, { headers: { origin: APP } });
    expect(dashboard.headers.get('access-control-allow-origin')).toBeNull();
    const dashboardPreflight = await preflight(`${open.url}/dashboard/api/login`, APP);
    expect(dashboardPreflight.headers.get('access-control-allow-origin')).toBeNull();
    const plain = await fetch(`${open.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } });
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('with a list of origins, allows those alone', async () => {
    const allowed = await preflight(`${listed.url}/v1/chat/completions`, APP);
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe(APP);
    expect(allowed.headers.get('vary')).toBe('Origin');
    const other = await preflight(`${listed.url}/v1/chat/completions`, 'https://evil.example.test');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    expect(other.status).toBe(401);
  });

  it.each([
    ['*', '*'],
    ['none', []],
    ['', []],
    [' https://A.example.test , http://localhost:5173/ ', ['https://a.example.test', 'http://localhost:5173']],
  ])('reads SVC_CORS_ORIGINS=%j', (text, expected) => {
    expect(parseCorsOrigins(text)).toEqual(expected);
  });

  it.each(['app.example.test', 'https://app.example.test/path', 'ftp://app.example.test', 'https://*.example.test'])('refuses SVC_CORS_ORIGINS=%j, saying what an origin is', (text) => {
    expect(() => parseCorsOrigins(text)).toThrow(/is not an origin: use scheme:\/\/host\[:port\]/);
  });
});

const SKIP = skipWithoutChromium('api-cors');

describe.skipIf(SKIP)('a web app calling the API from Chromium', () => {
  let browser: Browser;
  let svc: TestServer;
  let closed: TestServer;
  let app: Server;
  let appUrl: string;
  let token: string;

  beforeAll(async () => {
    browser = await launchChromium();
    svc = await startTestServer();
    closed = await startTestServer({ env: { SVC_CORS_ORIGINS: 'none' } });
    ({ token } = await svc.createKey());
    // The web app: another origin (another port) than svc's.
    app = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'));
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    await browser?.close();
    await svc?.close();
    await closed?.close();
    await new Promise((resolve) => app?.close(resolve));
  });

  /** In the page: a chat completion as the openai SDK's browser build sends it, streamed or not. */
  const callFromPage = (base: string, stream: boolean) => async () => {
    const page = await browser.newPage();
    try {
      await page.goto(appUrl);
      return await page.evaluate(
        async ({ base, token, stream }) => {
          try {
            const res = await fetch(`${base}/v1/chat/completions`, {
              method: 'POST',
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-stainless-os': 'Unknown', 'x-stainless-lang': 'js' },
              body: JSON.stringify({ model: 'svc01', stream, messages: [{ role: 'user', content: 'Hello' }] }),
            });
            return { status: res.status, requestId: res.headers.get('x-request-id'), body: await res.text() };
          } catch (err) {
            return { error: String(err) };
          }
        },
        { base, token, stream },
      );
    } finally {
      await page.close();
    }
  };

  it('gets the answer, streamed and not, and reads the request id', async () => {
    const plain = await callFromPage(svc.url, false)();
    expect(plain).toMatchObject({ status: 200, requestId: expect.stringMatching(/^chatcmpl-/) });
    expect(JSON.parse((plain as { body: string }).body).choices[0].message.content.length).toBeGreaterThan(0);
    const streamed = await callFromPage(svc.url, true)();
    expect(streamed).toMatchObject({ status: 200 });
    expect((streamed as { body: string }).body.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('is refused by the browser when the operator turned CORS off', async () => {
    expect(await callFromPage(closed.url, false)()).toEqual({ error: expect.stringContaining('Failed to fetch') });
  });
});
