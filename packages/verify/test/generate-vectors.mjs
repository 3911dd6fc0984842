// Regenerates test/vectors.json with node:crypto alone (never with @svc/verify's own sign()), so the
// fixture is an independent known answer for both the svc signer and this verifier.
// Usage: node packages/verify/test/generate-vectors.mjs
import { createHmac } from 'node:crypto';
import { writeFileSync } from 'node:fs';

const payload = {
  event: 'llm.request.completed',
  request_id: 'chatcmpl-9f2c1e',
  timestamp: '2026-01-02T03:04:05.678Z',
  user_id: '7f1c0f5e-8a43-4c55-9a0e-3f2f1a1b2c3d',
  model: 'svc01',
  input_tokens: 12,
  output_tokens: 34,
  total_tokens: 46,
  latency_ms: 812,
  status_code: 200,
  streaming: false,
  prompt: 'system: Be brief.\nuser: What is the capital of France?',
  response_text: 'Paris.',
  grounded: true,
  hallucination_score: 0.03,
};
const utf8 = (s) => Buffer.from(s, 'utf8');
const cases = [
  // Published in GitHub's webhook docs; GitHub's scheme is the same, so this is an outside known answer.
  ['github docs example', utf8('Hello, World!'), "It's a Secret to Everybody"],
  ['empty body', Buffer.alloc(0), 'whsec_test'],
  ['audit payload, compact JSON', utf8(JSON.stringify(payload)), 'whsec_3q2-7wAAb0xZZkzlCJXp-fMsQhCjwcN95UvVwZzCfvE'],
  ['audit payload, pretty JSON (whitespace is signed)', utf8(JSON.stringify(payload, null, 2)), 'whsec_3q2-7wAAb0xZZkzlCJXp-fMsQhCjwcN95UvVwZzCfvE'],
  ['test delivery', utf8(JSON.stringify({ ...payload, test: true, request_id: 'test-4d2a' })), 'whsec_3q2-7wAAb0xZZkzlCJXp-fMsQhCjwcN95UvVwZzCfvE'],
  ['non-ASCII UTF-8 body', utf8(JSON.stringify({ ...payload, prompt: 'user: Ça va? 中文 ключ', response_text: 'Très bien 🚀' })), 'whsec_unicode'],
  ['UTF-8 BOM before JSON', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8('{"a":1}')]), 'whsec_bom'],
  ['non-UTF-8 body (Latin-1 é, 0xFF 0xFE, lone continuation, NUL)', Buffer.from([0x7b, 0x22, 0xe9, 0x22, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x7d]), 'whsec_bytes'],
  ['non-ASCII secret', utf8('{"ok":true}'), 'sécret-ключ-🔑'],
  ['secret longer than the SHA-256 block (hashed first)', utf8('{"ok":true}'), 'k'.repeat(100)],
  ['1 KiB body', Buffer.alloc(1024, 'abcdefghijklmnopqrstuvwxyz0123456789'), 'whsec_kib'],
];
const vectors = cases.map(([name, body, secret]) => ({
  name,
  body_base64: body.toString('base64'),
  secret,
  signature: `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(body).digest('hex')}`,
}));
writeFileSync(new URL('./vectors.json', import.meta.url), `${JSON.stringify(vectors, null, 2)}\n`);
