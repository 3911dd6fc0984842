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
import { StringDecoder } from 'node:string_decoder';
import { alternate, loadBoth, srcAbOptions } from './lib/src-ab.mjs';

const opts = srcAbOptions('frame-path-ab', 'streams', '4000');
const ROUNDS = opts.rounds;
const STREAMS = opts.count;

const MODULES = { SseParser: 'upstream/sse.ts', TextFrames: 'upstream/text-frames.ts', FrameJson: 'chat/frame-json.ts', KeptTexts: 'chat/kept-text.ts' };
const builds = await loadBoth(opts, MODULES, 'frame-path-ab');

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

await alternate(builds, ROUNDS, round, `CPU ns per frame (upstream bytes → the client's chunk), median of ${ROUNDS} rounds of ${STREAMS} streams × ${FRAMES.length} frames:`, 0);
