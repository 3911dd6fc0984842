#!/usr/bin/env node
// The relay's own JavaScript per streamed frame, two checkouts' sources alternated in one process: the upstream's
// bytes of a frame decoded, parsed (SseParser), read (TextFrames, JSON.parse for the first), its text kept
// (KeptTexts), written as the client's frame (FrameJson) and framed as the HTTP/1.1 chunk SseWriter writes.
// Sockets, streams and timers are left out: what this measures is the part of a frame's CPU the relay's code
// decides, and the garbage it leaves (the collector's time, counted here, is where most of it shows).
//
//   taskset -c 1 node bench/frame-path-ab.mjs --base /tmp/base/apps/server/src [--rounds 20] [--streams 4000]
//
// Frames are the paced upstream's (bench/lib/fake-upstream.mjs): 50 text deltas ` w1` … ` w50` of one stream
// with a system_fingerprint. Prints the median CPU ns per frame of each build and in how many rounds the new one
// was lower.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { StringDecoder } from 'node:string_decoder';
import { bundleSrc } from './lib/bundle-src.mjs';

const { values: opts } = parseArgs({
  options: {
    base: { type: 'string' },
    src: { type: 'string', default: new URL('../apps/server/src', import.meta.url).pathname },
    rounds: { type: 'string', default: '20' },
    streams: { type: 'string', default: '4000' },
  },
});
if (!opts.base) throw new Error('usage: node bench/frame-path-ab.mjs --base OTHER/apps/server/src [--rounds 20] [--streams 4000]');
const ROUNDS = Number(opts.rounds);
const STREAMS = Number(opts.streams);

const MODULES = { SseParser: 'upstream/sse.ts', TextFrames: 'upstream/text-frames.ts', FrameJson: 'chat/frame-json.ts', KeptTexts: 'chat/kept-text.ts' };
const builds = {
  base: await import(await bundleSrc(resolve(opts.base), MODULES, 'frame-path-ab', 'base')),
  new: await import(await bundleSrc(resolve(opts.src), MODULES, 'frame-path-ab', 'new')),
};

const id = 'chatcmpl-fakeupstream0001';
const frame = (content, first) =>
  Buffer.from(
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 1764000000, model: 'gpt-4o-mini', system_fingerprint: 'fp_bench', choices: [{ index: 0, delta: first ? { role: 'assistant', content } : { content }, logprobs: null, finish_reason: null }] })}\n\n`,
  );
const FRAMES = Array.from({ length: 50 }, (_, i) => frame(` w${i + 1}`, i === 0));

/** CPU ns per frame over STREAMS streams of FRAMES with `build`'s classes. */
function round({ SseParser, TextFrames, FrameJson, KeptTexts }) {
  let sink = 0;
  const start = process.cpuUsage();
  for (let s = 0; s < STREAMS; s++) {
    const decoder = new StringDecoder('utf8');
    const parser = new SseParser();
    const frames = new TextFrames();
    const json = new FrameJson('chatcmpl-abcdefghijklmnopqrstuvwx', 1764000000, 'svc01');
    const kept = new KeptTexts();
    for (const bytes of FRAMES) {
      for (const event of parser.push(decoder.write(bytes))) {
        let chunk = frames.read(event.data);
        if (!chunk) frames.learn(event.data, (chunk = JSON.parse(event.data)));
        kept.append(0, chunk.choices[0].delta.content);
        const data = `data: ${json.of(chunk.choices, chunk.system_fingerprint)}\n\n`;
        // As SseWriter writes it; Buffer.byteLength stands for the socket write's flattening of the string.
        sink += Buffer.byteLength(`${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`);
      }
    }
    sink += kept.text(0).length;
  }
  const used = process.cpuUsage(start);
  if (sink === 0) throw new Error('nothing was written');
  return ((used.user + used.system) * 1000) / (STREAMS * FRAMES.length);
}

round(builds.base);
round(builds.new);
const base = [];
const next = [];
for (let r = 0; r < ROUNDS; r++) {
  // Alternated, so that neither build always runs after the other's garbage.
  if (r % 2 === 0) (next.push(round(builds.new)), base.push(round(builds.base)));
  else (base.push(round(builds.base)), next.push(round(builds.new)));
}
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const lower = next.filter((value, i) => value < base[i]).length;
console.log(`CPU ns per frame (upstream bytes → the client's chunk), median of ${ROUNDS} rounds of ${STREAMS} streams × ${FRAMES.length} frames:`);
console.log(`base ${median(base).toFixed(0)}, new ${median(next).toFixed(0)} (${(((median(next) - median(base)) / median(base)) * 100).toFixed(1)} %); new lower in ${lower} of ${ROUNDS}`);
