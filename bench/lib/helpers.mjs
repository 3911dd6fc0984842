// The bench's helper servers, each started pinned to a core and awaited until it answers.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, spawnPinned, waitHttp } from './procs.mjs';

const LIB = new URL('.', import.meta.url).pathname;

async function startHelper(script, healthPath, core, args = []) {
  const port = await freePort();
  const proc = spawnPinned(core, process.execPath, [join(LIB, script), ...args, String(port)]);
  const url = `http://127.0.0.1:${port}`;
  await waitHttp(`${url}${healthPath}`, { proc });
  return { proc, url };
}

/**
 * The zero-latency OpenAI-compatible fake upstream (`fake-upstream.mjs`): `base` is what svc takes as its
 * upstream base URL.
 *
 * @example
 * const upstream = await startFakeUpstream(0); // { proc, url, base: `${url}/v1` }
 */
export async function startFakeUpstream(core) {
  const helper = await startHelper('fake-upstream.mjs', '/healthz', core);
  return { ...helper, base: `${helper.url}/v1` };
}

/**
 * The webhook receiver (`webhook-receiver.mjs`): `hook` is the URL to deliver to, `received()` the number of
 * deliveries it has had (its `/stats`).
 *
 * @example
 * const receiver = await startWebhookReceiver(0); // { proc, url, hook: `${url}/hook`, received }
 * const before = await receiver.received();
 */
export async function startWebhookReceiver(core) {
  const helper = await startHelper('webhook-receiver.mjs', '/stats', core);
  const received = async () => (await (await fetch(`${helper.url}/stats`)).json()).received;
  return { ...helper, hook: `${helper.url}/hook`, received };
}

/**
 * The bare Node relay (`node-relay.mjs`) to the fake upstream on `upstreamPort`, in `mode` (bytes | frames |
 * frames+grounding | frames+webhook | frames+features; the last two deliver to `webhookUrl`).
 *
 * @example
 * const relay = await startNodeRelay({ core: 1, mode: 'frames', upstreamPort: 4000 }); // { proc, url }
 */
export function startNodeRelay({ core, mode, upstreamPort, webhookUrl }) {
  return startHelper('node-relay.mjs', '/', core, [mode, String(upstreamPort), ...(webhookUrl ? [webhookUrl] : [])]);
}

/**
 * A self-signed certificate for 127.0.0.1 (openssl), written to a temp dir: `certFile` is what a client trusts
 * (NODE_EXTRA_CA_CERTS), `keyFile` the server's key.
 *
 * @example
 * const { certFile, keyFile } = benchCertificate();
 */
export function benchCertificate() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-tls-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', '/CN=svc-bench',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-addext', 'basicConstraints=critical,CA:TRUE'],
    { stdio: 'ignore' },
  );
  return { certFile, keyFile };
}

/**
 * The fake upstream at a model's pace (`fake-upstream.mjs --rate`): streams `tokens` tokens at `rate` tokens/s,
 * each gap within ±`jitter` (0..1) of 1/rate; `bigAnswers`, a JSON file of strings, answers large requests (see
 * fake-upstream.mjs). `base` is the upstream base URL, `stats()` its `/stats`. With
 * `tls` ('h1' | 'h2', and `certificate` from benchCertificate()) `base` is an https URL whose ALPN offers
 * only http/1.1, or h2 and http/1.1; `url` (and /stats) stay plain HTTP.
 *
 * @example
 * const upstream = await startPacedUpstream(0, { rate: 10, tokens: 50, jitter: 0.2 });
 */
export async function startPacedUpstream(core, { rate, tokens, jitter, tls, certificate, bigAnswers }) {
  const args = ['--rate', String(rate), '--tokens', String(tokens), '--jitter', String(jitter)];
  if (bigAnswers) args.push('--big-answers', bigAnswers);
  const tlsPort = tls ? await freePort() : null;
  if (tls) args.push('--tls', tls, '--cert', certificate.certFile, '--key', certificate.keyFile, '--tls-port', String(tlsPort));
  const helper = await startHelper('fake-upstream.mjs', '/healthz', core, args);
  const stats = async () => (await fetch(`${helper.url}/stats`)).json();
  return { ...helper, base: tls ? `https://127.0.0.1:${tlsPort}/v1` : `${helper.url}/v1`, stats };
}
