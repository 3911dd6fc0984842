#!/usr/bin/env node
// Per-request costs of relaying the bench's stream (the fake upstream's 23 frames, 6.4 KB), one technique
// at a time, with tinybench on one core:
//   - decoding the bytes: a streaming TextDecoder (new per stream) against node's StringDecoder;
//   - each frame's JSON: a new frame object + JSON.stringify against a per-stream prefix + the text-delta
//     choice written by hand (the technique of apps/server/src/chat/frame-json.ts);
//   - JSON.parse of the frames (what validating them costs at least).
//
//   taskset -c 1 node bench/stream-relay.bench.mjs
//
// The end-to-end effect on svc is measured with `node bench/ab.mjs --plain --stream` on two builds.
import { StringDecoder } from 'node:string_decoder';
import { Bench } from 'tinybench';
import { USAGE, answerPieces } from './lib/fixtures.mjs';

const created = 1_735_689_600;
const upstreamFrame = (choices, extra = {}) =>
  JSON.stringify({ id: 'chatcmpl-fakeupstream0001', object: 'chat.completion.chunk', created, model: 'gpt-4o-mini-2024-07-18', system_fingerprint: 'fp_bench', choices, ...extra });
const datas = [
  ...answerPieces(20).map((content, i) => upstreamFrame([{ index: 0, delta: i === 0 ? { role: 'assistant', content } : { content }, logprobs: null, finish_reason: null }])),
  upstreamFrame([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]),
];
const body = Buffer.from([...datas, upstreamFrame([], { usage: USAGE }), '[DONE]'].map((d) => `data: ${d}\n\n`).join(''));
const parsed = datas.map((d) => JSON.parse(d));
const id = 'chatcmpl-0123456789abcdef01234567';

const CHOICE_KEYS = ['index', 'delta', 'logprobs', 'finish_reason'];
function textChoiceJson(choice) {
  let n = 0;
  for (const key in choice) if (key !== CHOICE_KEYS[n++]) return undefined;
  if (n !== 4 || choice.logprobs !== null) return undefined;
  let role = false;
  for (const key in choice.delta) {
    if (key === 'role') role = true;
    else if (key !== 'content') return undefined;
  }
  if (typeof choice.delta.content !== 'string') return undefined;
  const finish = choice.finish_reason === null ? 'null' : JSON.stringify(choice.finish_reason);
  return `[{"index":${choice.index},"delta":{${role ? '"role":"assistant",' : ''}"content":${JSON.stringify(choice.delta.content)}},"logprobs":null,"finish_reason":${finish}}]`;
}

let sink = 0;
const bench = new Bench({ time: 1000 });
bench
  .add('decode: TextDecoder, stream: true (new per stream)', () => {
    sink += new TextDecoder().decode(body, { stream: true }).length;
  })
  .add('decode: StringDecoder (new per stream)', () => {
    sink += new StringDecoder('utf8').write(body).length;
  })
  .add('21 frames: object + JSON.stringify', () => {
    let out = '';
    for (const c of parsed) {
      const frame = { id, object: 'chat.completion.chunk', created, model: 'svc01', choices: c.choices, ...(c.system_fingerprint !== undefined ? { system_fingerprint: c.system_fingerprint } : undefined) };
      out += `data: ${JSON.stringify(frame)}\n\n`;
    }
    sink += Buffer.byteLength(out);
  })
  .add('21 frames: prefix + hand-written text choice', () => {
    const head = `{"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${created},"model":"svc01","choices":`;
    let out = '';
    for (const c of parsed) {
      const choices = c.choices.length === 1 ? (textChoiceJson(c.choices[0]) ?? JSON.stringify(c.choices)) : JSON.stringify(c.choices);
      out += `data: ${head}${choices},"system_fingerprint":${JSON.stringify(c.system_fingerprint)}}\n\n`;
    }
    sink += Buffer.byteLength(out);
  })
  .add('21 frames: JSON.parse', () => {
    for (const d of datas) sink += JSON.parse(d).created;
  });
await bench.run();
console.table(bench.table());
if (sink === 0) console.log('');
