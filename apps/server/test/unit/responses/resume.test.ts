import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/storage/store.js';
import { EventLogs } from '../../../src/responses/event-log.js';
import { resumeStream, type ResumeDeps } from '../../../src/responses/resume.js';
import { storeVariants } from '../../support/databases.js';
import { storedResponse } from '../../support/responses.js';

const variants = await storeVariants('resume');
const logger = pino({ level: 'silent' });

describe.each(variants)('a resumed background stream on %s', (_name, url) => {
  let store: Store;
  let server: http.Server | undefined;
  beforeAll(async () => {
    store = await openStore(url);
  });
  afterAll(async () => {
    server?.close();
    await store?.close();
  });

  it('whose client left before its reader began (while the request was authorized) ends at once, not when the response ends', async () => {
    const running = { ...storedResponse({ id: 'resp_left', previous: null, createdAt: 7_000, text: '' }), status: 'in_progress' as const, background: true, output: [] };
    // Its lease reaches far: the response runs for the whole test, so only the client's leaving can end the reader.
    await store.responses.save('key_r', running, [{ type: 'message', id: 'in_left', role: 'user', content: 'Hi' }], 0, undefined, {
      owner: 'a-runner',
      until: Date.now() + 3_600_000,
      keepsEvents: true,
    });
    await store.responseEvents.append('resp_left', { seq: 0, lastSeq: 0, text: 'event: response.created\ndata: {}\n\n' });
    const deps: ResumeDeps = {
      responseEvents: store.responseEvents,
      responses: store.responses,
      logs: new EventLogs({ store: store.responseEvents, maxBytes: 1 << 20, logger }),
      stopping: new AbortController().signal,
      config: { streamKeepAliveMs: 15_000, responseStreamMaxBytes: 1 << 20, upstream: { timeoutMs: 60_000 } },
      logger,
    };
    // The route is reached only after the client's connection closed, as when it leaves during the key's lookup.
    let arrived!: () => void;
    const arrival = new Promise<void>((resolve) => (arrived = resolve));
    const reading = new Promise<Promise<void>>((resolve) => {
      server = http.createServer((_req, res) => {
        res.once('close', () => resolve(resumeStream(deps, res, 'key_r', 'resp_left', undefined)));
        arrived();
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const client = net.connect((server!.address() as AddressInfo).port, '127.0.0.1');
    client.write('GET /v1/responses/resp_left?stream=true HTTP/1.1\r\nhost: x\r\n\r\n');
    await arrival;
    client.destroy();
    await (await reading);
    expect(await store.responseEvents.state('key_r', 'resp_left')).toEqual({ events: 'kept', running: true });
  });

  it('that comes once the server began its graceful stop ends at once (its client resumes on another instance) rather than holding the stop up', async () => {
    const running = { ...storedResponse({ id: 'resp_stop', previous: null, createdAt: 7_000, text: '' }), status: 'in_progress' as const, background: true, output: [] };
    await store.responses.save('key_r', running, [{ type: 'message', id: 'in_stop', role: 'user', content: 'Hi' }], 0, undefined, {
      owner: 'a-runner',
      until: Date.now() + 3_600_000,
      keepsEvents: true,
    });
    await store.responseEvents.append('resp_stop', { seq: 0, lastSeq: 0, text: 'event: response.created\ndata: {}\n\n' });
    const stopping = new AbortController();
    stopping.abort();
    const deps: ResumeDeps = {
      responseEvents: store.responseEvents,
      responses: store.responses,
      logs: new EventLogs({ store: store.responseEvents, maxBytes: 1 << 20, logger }),
      stopping: stopping.signal,
      config: { streamKeepAliveMs: 15_000, responseStreamMaxBytes: 1 << 20, upstream: { timeoutMs: 60_000 } },
      logger,
    };
    const late = http.createServer((_req, res) => void resumeStream(deps, res, 'key_r', 'resp_stop', undefined));
    await new Promise<void>((resolve) => late.listen(0, '127.0.0.1', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(late.address() as AddressInfo).port}/`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('');
    } finally {
      late.closeAllConnections();
      late.close();
    }
  });
});
