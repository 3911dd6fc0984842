import { describe, expect, it } from 'vitest';
import { startFakeUpstream } from './support/fake-upstream.js';
import { createOpenAICompatibleUpstream } from '../src/upstream/openai-compatible.js';

describe('smoke', () => {
  it('works', async () => {
    const fake = await startFakeUpstream({ answer: 'a b c' }, { https: 'h2' });
    const up = createOpenAICompatibleUpstream({ baseUrl: fake.url, timeoutMs: 10_000, ca: fake.ca, connections: 100 });
    const ac = new AbortController();
    const c = await up.complete({ body: { model: 'm', messages: [{ role: 'user', content: 'x' }] } as never, signal: ac.signal as never, thinking: false });
    console.log(JSON.stringify(c).slice(0, 200));
    const streams = await Promise.all(Array.from({ length: 250 }, async () => {
      const s = await up.stream({ body: { model: 'm', messages: [{ role: 'user', content: 'x' }] } as never, signal: ac.signal as never, thinking: false });
      let n = 0; for await (const b of s) n += b.length; return n;
    }));
    console.log(streams.slice(0, 3), fake.sessions, fake.connections, fake.peakOpen, new Set(fake.requests.map((r) => r.httpVersion)));
    await up.close(); await fake.close();
  });
});
