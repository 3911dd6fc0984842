#!/usr/bin/env node
// What everything on adds to a streamed request's own JavaScript at its end, two checkouts' sources alternated in
// one process: the grounding check as the server runs it (`createOfflineGrounder`, inline, its source-index cache
// warm), the finish frame carrying `svc` (FrameJson) and the audit payload's bytes (buildAuditPayload). The
// outbox's SQLite work, the webhook's signatures and send are left out (`bench/outbox-pace.mjs` measures the
// first). Checks first that both builds give the same frame and payload bytes.
//
//   taskset -c 1 node bench/feature-path-ab.mjs --base /tmp/base/apps/server/src [--rounds 20] [--requests 2000]
//
// The answer is the paced upstream's (bench/lib/fake-upstream.mjs, 50 tokens `w0 … w49`: every word flagged) and
// the conversation svc-full's in `npm run bench:streams`. Prints the median CPU µs per request of each build and
// in how many rounds the new one was lower.
import { alternate, loadBoth, srcAbOptions } from './lib/src-ab.mjs';
import { messages } from './lib/fixtures.mjs';

const opts = srcAbOptions('feature-path-ab', 'requests', '2000');
const ROUNDS = opts.rounds;
const REQUESTS = opts.count;

const MODULES = { createOfflineGrounder: 'chat/grounder.ts', FrameJson: 'chat/frame-json.ts', buildAuditPayload: 'audit/audit-payload.ts' };
// Each grounder as the server makes it (inline: no thread).
const loaded = await loadBoth(opts, MODULES, 'feature-path-ab');
const withGrounder = (modules) => ({ ...modules, grounder: modules.createOfflineGrounder({ thread: null }) });
const builds = { base: withGrounder(loaded.base), new: withGrounder(loaded.new) };

const answer = Array.from({ length: 50 }, (_, i) => `${i === 0 ? '' : ' '}w${i}`).join('');
const finish = () => [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }];
const completed = (svc) => ({
  requestId: 'chatcmpl-abcdefghijklmnopqrstuvwx',
  startedAt: 1764000000000,
  finishedAt: 1764000005123,
  key: { user_id: '0b7e1c52-4f3c-4a8e-9d55-2f0c1a2b3c4d' },
  usage: { prompt_tokens: 412, completion_tokens: 50, total_tokens: 462 },
  statusCode: 200,
  streaming: true,
  messages,
  responseText: answer,
  svc,
});

/** One request's end with `build`: the check, the finish frame, the payload's bytes. */
async function end(build, sequence) {
  const svc = await build.grounder.check({ messages, answer, requested: true });
  const frame = new build.FrameJson('chatcmpl-abcdefghijklmnopqrstuvwx', 1764000000, 'svc01', { includeUsage: true }).of(finish(), 'fp_bench', svc);
  const { body } = build.buildAuditPayload(completed(svc), sequence);
  return { frame, body };
}

const a = await end(builds.base, 1);
const b = await end(builds.new, 1);
if (a.frame !== b.frame || a.body !== b.body) throw new Error('the two builds give different frame or payload bytes');

/** CPU µs per request over REQUESTS requests with `build`. */
async function round(build) {
  let sink = 0;
  const start = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) {
    const { frame, body } = await end(build, i);
    sink += frame.length + body.length;
  }
  const used = process.cpuUsage(start);
  if (sink === 0) throw new Error('nothing was made');
  return (used.user + used.system) / REQUESTS;
}

await alternate(builds, ROUNDS, round, `CPU µs per request (grounding check, finish frame, audit payload), median of ${ROUNDS} rounds of ${REQUESTS} requests:`, 1);
