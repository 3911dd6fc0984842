import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import * as undici from 'undici';
import { Agent, Pool, request } from '../../../src/http/undici-dispatchers.js';

describe('undici dispatchers loaded without undici index', () => {
  it("are undici's own Pool and Agent classes", () => {
    expect(Pool).toBe(undici.Pool);
    expect(Agent).toBe(undici.Agent);
  });

  it('request() sends through any dispatcher, as dispatcher.request would', async () => {
    const server = createServer((req, res) => res.end(`${req.method} ${req.url}`));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const pool = new Pool(origin);
    try {
      const response = await request(pool, { origin, path: '/x?y=1', method: 'POST', body: 'b' });
      expect(response.statusCode).toBe(200);
      expect(await response.body.text()).toBe('POST /x?y=1');
    } finally {
      await pool.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
