import { randomBytes } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it, vi } from 'vitest';
import { builds, samplePayload } from '../test/support.js';
import { WebhookVerificationError, webhookKey } from './index.js';

const ID = 'dlv_test1';
const TS = 1_735_689_600;
const NOW = TS * 1000;
const BODY = '{"event":"llm.request.completed"}';
// Known answers, computed by the `standardwebhooks` library's own signer.
const VECTORS = [
  { name: 'whsec_<base64> secret (decoded key)', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', signature: 'v1,CXkxz42Q1U9bTOntR6/fLPpDODh8vWjdXP9myz8ruGo=' },
  { name: 'user-chosen secret (UTF-8 key)', secret: 'my own secret', signature: 'v1,cZFonio13+7ZmZm4BNgKuT1ffHyCUvGWz682jEZdXSc=' },
];
const headersOf = (signature: string, timestamp = TS, id = ID) => ({
  'webhook-id': id,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signature,
});

describe('webhookKey', () => {
  it('decodes whsec_<base64> as the libraries do, and takes anything else as UTF-8', () => {
    expect(Buffer.from(webhookKey('whsec_AAEC')).toString('hex')).toBe('000102');
    expect(Buffer.from(webhookKey('whsec_AA==')).toString('hex')).toBe('00');
    // base64url (the first generated secrets), odd lengths and an empty body after the prefix are not base64.
    for (const secret of ['whsec_ab-_', 'whsec_abc', 'whsec_', 'plain secret']) {
      expect(Buffer.from(webhookKey(secret)).toString('utf8')).toBe(secret);
    }
  });
});

describe.each(builds)('Standard Webhooks ($name build)', ({ verifyWebhook, constructWebhookEvent, signWebhook }) => {
  it.each(VECTORS)('signs and verifies the known-answer vector: $name', async (v) => {
    expect(await signWebhook(BODY, { id: ID, timestamp: TS }, v.secret)).toBe(v.signature);
    expect(await verifyWebhook(BODY, headersOf(v.signature), v.secret, { now: NOW })).toBe(true);
    expect(await verifyWebhook(Buffer.from(BODY), new Headers(headersOf(v.signature)), v.secret, { now: new Date(NOW) })).toBe(true);
  });

  it('signs with every secret, space-separated, and accepts any of them', async () => {
    const both = await signWebhook(BODY, { id: ID, timestamp: TS }, VECTORS.map((v) => v.secret));
    expect(both).toBe(VECTORS.map((v) => v.signature).join(' '));
    for (const v of VECTORS) expect(await verifyWebhook(BODY, headersOf(both), v.secret, { now: NOW })).toBe(true);
    expect(await verifyWebhook(BODY, headersOf(VECTORS[0]!.signature), ['another secret', VECTORS[0]!.secret], { now: NOW })).toBe(true);
    expect(await verifyWebhook(BODY, headersOf(both), 'another secret', { now: NOW })).toBe(false);
  });

  it('is verified by the standardwebhooks and svix libraries with the secret as shown', async () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const timestamp = Math.floor(Date.now() / 1000);
    const body = JSON.stringify(samplePayload);
    const headers = headersOf(await signWebhook(body, { id: ID, timestamp }, secret), timestamp);
    expect(new StandardWebhook(secret).verify(body, headers)).toEqual(samplePayload);
    expect(new SvixWebhook(secret).verify(body, headers)).toEqual(samplePayload);
    // And the other way round: what the library signs, this verifies.
    const signed = new StandardWebhook(secret).sign(ID, new Date(timestamp * 1000), body);
    expect(await verifyWebhook(body, headersOf(signed, timestamp), secret)).toBe(true);
  });

  it('refuses a replay: a timestamp outside the tolerance, either way', async () => {
    const { signature } = VECTORS[0]!;
    const secret = VECTORS[0]!.secret;
    expect(await verifyWebhook(BODY, headersOf(signature), secret, { now: NOW + 300_000 })).toBe(true);
    expect(await verifyWebhook(BODY, headersOf(signature), secret, { now: NOW + 301_000 })).toBe(false);
    expect(await verifyWebhook(BODY, headersOf(signature), secret, { now: NOW - 301_000 })).toBe(false);
    expect(await verifyWebhook(BODY, headersOf(signature), secret, { now: NOW + 3_600_000, toleranceSeconds: 3600 })).toBe(true);
    await expect(Promise.resolve().then(() => constructWebhookEvent(BODY, headersOf(signature), secret, { now: NOW + 301_000 }))).rejects.toMatchObject({ code: 'timestamp_out_of_range', status: 400 });
    // How far and which way, so that a receiver with a skewed clock sees it is its clock.
    await expect(Promise.resolve().then(() => constructWebhookEvent(BODY, headersOf(signature), secret, { now: NOW + 612_000 }))).rejects.toThrow(
      `webhook-timestamp ${TS} is 612 s behind this receiver's clock (tolerance 300 s)`,
    );
    await expect(Promise.resolve().then(() => constructWebhookEvent(BODY, headersOf(signature), secret, { now: NOW - 400_000, toleranceSeconds: 60 }))).rejects.toThrow(
      `webhook-timestamp ${TS} is 400 s ahead of this receiver's clock (tolerance 60 s)`,
    );
  });

  it.each([
    ['no webhook-id', { 'webhook-timestamp': String(TS), 'webhook-signature': VECTORS[0]!.signature }, 'missing_signature'],
    ['no signature', { 'webhook-id': ID, 'webhook-timestamp': String(TS) }, 'missing_signature'],
    ['timestamp not in seconds', headersOf(VECTORS[0]!.signature, 'soon' as unknown as number), 'malformed_signature'],
    ['only another version', headersOf(`v1a,${VECTORS[0]!.signature.slice(3)}`), 'malformed_signature'],
    ['v1 not base64', headersOf(`v1,${'!'.repeat(44)}`), 'malformed_signature'],
    ['id changed', headersOf(VECTORS[0]!.signature, TS, 'dlv_other'), 'signature_mismatch'],
    ['timestamp changed', headersOf(VECTORS[0]!.signature, TS + 1), 'signature_mismatch'],
  ] as const)('refuses %s', async (_name, headers, code) => {
    const secret = VECTORS[0]!.secret;
    expect(await verifyWebhook(BODY, headers, secret, { now: NOW })).toBe(false);
    const err = await Promise.resolve()
      .then(() => constructWebhookEvent(BODY, headers, secret, { now: NOW }))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WebhookVerificationError);
    expect(err).toMatchObject({ code });
  });

  it.each([
    // A key without a signing secret: svc sends webhook-id and webhook-timestamp, and no signature.
    ['unsigned (the key has no signing secret)', { 'webhook-id': ID, 'webhook-timestamp': String(TS) },
      'Missing webhook-signature header (and X-Svc-Signature): svc signs a delivery only when its API key has a signing secret. Set one'],
    // `svc-cli replay` without --secret: the recorded X-Svc-Signature, no Standard Webhooks headers.
    ['X-Svc-Signature only', { 'x-svc-signature': `sha256=${'0'.repeat(64)}` },
      'Missing webhook-id, webhook-timestamp and webhook-signature headers: X-Svc-Signature alone carries no timestamp. Verify such a delivery with constructEvent'],
    ['no webhook-id', { 'webhook-timestamp': String(TS), 'webhook-signature': VECTORS[0]!.signature }, 'Missing webhook-id header.'],
  ] as const)('says which headers are missing and what to do: %s', async (_name, headers, message) => {
    const err = await Promise.resolve()
      .then(() => constructWebhookEvent(BODY, headers, VECTORS[0]!.secret, { now: NOW }))
      .then(() => undefined, (e: unknown) => e as WebhookVerificationError);
    expect(err).toMatchObject({ code: 'missing_signature' });
    expect(err?.message.startsWith(message)).toBe(true);
  });

  it('says so when the secret has whitespace around it (a pasted newline), and only then', async () => {
    const v = VECTORS[0]!;
    const refusal = (secret: string): Promise<WebhookVerificationError> =>
      Promise.resolve()
        .then(() => constructWebhookEvent(BODY, headersOf(v.signature), secret, { now: NOW }))
        .then(() => expect.fail('accepted'), (e: unknown) => e as WebhookVerificationError);
    const pasted = await refusal(`${v.secret}\n`);
    expect(pasted).toMatchObject({ code: 'signature_mismatch', message: expect.stringMatching(/secret starts or ends with whitespace .*trim it/) });
    expect((await refusal('another secret')).message).not.toMatch(/whitespace/);
  });

  it('says so when the secret is wrapped in quotes or is the API key, and only then', async () => {
    const v = VECTORS[0]!;
    const refusal = (secret: string): Promise<WebhookVerificationError> =>
      Promise.resolve()
        .then(() => constructWebhookEvent(BODY, headersOf(v.signature), secret, { now: NOW }))
        .then(() => expect.fail('accepted'), (e: unknown) => e as WebhookVerificationError);
    expect(await refusal(`"${v.secret}"`)).toMatchObject({ code: 'signature_mismatch', message: expect.stringMatching(/wrapped in quotes.*remove them/) });
    expect(await refusal('sk-svc-18JOpJ4GtO3VT31VBnAM_rrcqnAbieEU8IP5famBQ7k')).toMatchObject({
      code: 'signature_mismatch',
      message: expect.stringMatching(/is an svc API key \(sk-svc-…\), not the key's signing secret/),
    });
    expect((await refusal('another secret')).message).not.toMatch(/quotes|API key/);
  });

  it('names a body re-serialised on the way in, and where it differs', async () => {
    const v = VECTORS[0]!;
    const body = JSON.stringify({ ...samplePayload, prompt: 'user: café' });
    const headers = headersOf(await signWebhook(body, { id: ID, timestamp: TS }, v.secret));
    // A non-ASCII character as a \u escape (Python's ensure_ascii): the same JSON, other bytes.
    const escaped = body.replace('é', '\\u00e9');
    const err = await Promise.resolve()
      .then(() => constructWebhookEvent(new TextEncoder().encode(escaped), headers, v.secret, { now: NOW }))
      .then(() => expect.fail('accepted'), (e: unknown) => e as WebhookVerificationError);
    expect(err.code).toBe('signature_mismatch');
    expect(err.message).toContain(`it differs at character ${body.indexOf('é')}, "\\\\" where compact JSON has "é"`);
    expect(err.message).toContain('a body parser or framework re-serialised it before verification');
  });

  it('says so when the secret and the one svc signs with differ only by the whsec_ prefix, and only then', async () => {
    // standardwebhooks and svix take "whsec_<base64>" and "<base64>" alike; here a secret without the prefix is its
    // characters, another key, so a receiver ported from them failed with only "wrong signing secret".
    const v = VECTORS[0]!;
    const refusal = (signature: string, secret: string | string[]): Promise<WebhookVerificationError> =>
      Promise.resolve()
        .then(() => constructWebhookEvent(BODY, headersOf(signature), secret, { now: NOW }))
        .then(() => expect.fail('accepted'), (e: unknown) => e as WebhookVerificationError);
    const unprefixed = v.secret.slice('whsec_'.length);
    // What standardwebhooks does with it: the same key as with the prefix.
    expect(new StandardWebhook(unprefixed).sign(ID, new Date(NOW), BODY)).toBe(v.signature);
    expect(await refusal(v.signature, unprefixed)).toMatchObject({
      code: 'signature_mismatch',
      message: expect.stringMatching(/missing its "whsec_" prefix: pass it exactly as the svc dashboard shows it/),
    });
    expect(await refusal(v.signature, ['my own secret', unprefixed])).toMatchObject({ message: expect.stringMatching(/missing its "whsec_" prefix/) });
    // The key's secret set without the prefix (UTF-8 key), the receiver given it with one.
    const bareSignature = await signWebhook(BODY, { id: ID, timestamp: TS }, unprefixed);
    expect(await refusal(bareSignature, v.secret)).toMatchObject({ message: expect.stringMatching(/matches the signing secret without its "whsec_" prefix/) });
    // Another base64 secret, with or without the prefix, is only a wrong one.
    for (const other of ['QUJDRA==', 'whsec_QUJDRA==', 'whsec_']) expect((await refusal(v.signature, other)).message).not.toMatch(/prefix/);
    // Never accepted: only the message changes.
    expect(await verifyWebhook(BODY, headersOf(v.signature), unprefixed, { now: NOW })).toBe(false);
  });

  it('skips unknown versions beside a valid v1 and reads array-valued node headers', async () => {
    const v = VECTORS[0]!;
    const headers = { ...headersOf(`v2,abc ${v.signature}`), 'webhook-id': [ID] };
    expect(await verifyWebhook(BODY, headers, v.secret, { now: NOW })).toBe(true);
    expect(await verifyWebhook(BODY, new Headers({ 'webhook-id': ID }), v.secret, { now: NOW })).toBe(false);
  });

  it('reads a plain headers object whatever the case of its names, as standardwebhooks and svix do', async () => {
    // AWS Lambda behind API Gateway, hand-built objects in tests and ports from svix keep `Webhook-Id` as sent.
    const v = VECTORS[0]!;
    const capitalised = { 'Webhook-Id': ID, 'Webhook-Timestamp': String(TS), 'WEBHOOK-SIGNATURE': v.signature };
    expect(await verifyWebhook(BODY, capitalised, v.secret, { now: NOW })).toBe(true);
    // The exact lower-case name wins over another spelling, as node's req.headers has it.
    expect(await verifyWebhook(BODY, { ...capitalised, 'webhook-id': 'another id' }, v.secret, { now: NOW })).toBe(false);
  });

  it('reads a Map of headers whatever the case of its names, a repeated header given as a list', async () => {
    // A Map has get() as Headers has, but its names are case-sensitive: new Map(Object.entries(event.headers)) or one
    // built from rawHeaders keeps `Webhook-Id` as sent (was missing_signature), and a list value is not a string (was
    // a TypeError, "signature.split is not a function").
    const v = VECTORS[0]!;
    const capitalised = new Map([['Webhook-Id', ID], ['Webhook-Timestamp', String(TS)], ['Webhook-Signature', v.signature]]);
    expect(await verifyWebhook(BODY, capitalised, v.secret, { now: NOW })).toBe(true);
    const listed = new Map<string, string | string[]>([['webhook-id', ID], ['webhook-timestamp', [String(TS)]], ['webhook-signature', ['v2,abc', v.signature]]]);
    expect(await verifyWebhook(BODY, listed, v.secret, { now: NOW })).toBe(true);
    expect(await verifyWebhook(BODY, new Map([['Webhook-Id', ID]]), v.secret, { now: NOW })).toBe(false);
    const body = JSON.stringify(samplePayload);
    const signed = new Map([['WEBHOOK-ID', ID], ['webhook-timestamp', String(TS)], ['Webhook-Signature', await signWebhook(body, { id: ID, timestamp: TS }, v.secret)]]);
    expect(await constructWebhookEvent(body, signed, v.secret, { now: NOW })).toEqual(samplePayload);
  });

  it('returns the typed payload of a valid delivery', async () => {
    const body = JSON.stringify(samplePayload);
    const secret = VECTORS[1]!.secret;
    const headers = headersOf(await signWebhook(body, { id: ID, timestamp: TS }, secret));
    expect(await constructWebhookEvent(new TextEncoder().encode(body), headers, secret, { now: NOW })).toEqual(samplePayload);
  });

  it('throws TypeError on misuse', async () => {
    const call = (f: () => unknown) => Promise.resolve().then(f);
    // @ts-expect-error a parsed body cannot be verified
    await expect(call(() => verifyWebhook({}, headersOf('x'), 's'))).rejects.toThrow(TypeError);
    // @ts-expect-error no headers
    await expect(call(() => verifyWebhook(BODY, null, 's'))).rejects.toThrow(TypeError);
    await expect(call(() => verifyWebhook(BODY, headersOf('x'), ''))).rejects.toThrow(TypeError);
    await expect(call(() => verifyWebhook(BODY, headersOf('x'), 's', { toleranceSeconds: -1 }))).rejects.toThrow(TypeError);
    await expect(call(() => verifyWebhook(BODY, headersOf('x'), 's', { now: Number.NaN }))).rejects.toThrow(TypeError);
    // @ts-expect-error a parsed body cannot be verified
    await expect(call(() => constructWebhookEvent(1, headersOf('x'), 's'))).rejects.toThrow(TypeError);
    // @ts-expect-error the message needs a timestamp
    await expect(call(() => signWebhook(BODY, { id: ID }, 's'))).rejects.toThrow(TypeError);
    await expect(call(() => signWebhook(BODY, { id: '', timestamp: TS }, 's'))).rejects.toThrow(TypeError);
    // @ts-expect-error a parsed body cannot be signed
    await expect(call(() => signWebhook({}, { id: ID, timestamp: TS }, 's'))).rejects.toThrow(TypeError);
    // @ts-expect-error no message
    await expect(call(() => signWebhook(BODY, null, 's'))).rejects.toThrow(TypeError);
  });
});

describe('signWebhook (node build)', () => {
  it('signs `{id}.{timestamp}.{body}` without copying the body into a joined array', async () => {
    const { signWebhook } = await import('./node/verify-webhook.js');
    const body = Buffer.from(JSON.stringify({ event: 'llm.request.completed', response_text: 'x'.repeat(10_000) }));
    const expected = new StandardWebhook(VECTORS[0]!.secret).sign(ID, new Date(NOW), body.toString());
    // Joining them is a new array and two `set` copies into it.
    const copied = vi.spyOn(Uint8Array.prototype, 'set');
    const signature = signWebhook(body, { id: ID, timestamp: TS }, VECTORS[0]!.secret);
    expect(copied).not.toHaveBeenCalled();
    copied.mockRestore();
    expect(signature).toBe(expected);
  });
});

describe('verifyWebhook (web build) with a header of many signatures', () => {
  it('hashes the body once per secret, not once per signature the sender put in the header', async () => {
    const { verifyWebhook, constructWebhookEvent } = await import('./web/verify-webhook.js');
    const v = VECTORS[0]!;
    const bogus = Array.from({ length: 300 }, (_, i) => `v1,${Buffer.alloc(32, i).toString('base64')}`);
    const hashed = [vi.spyOn(crypto.subtle, 'sign'), vi.spyOn(crypto.subtle, 'verify')];
    const hashes = () => hashed.reduce((n, spy) => n + spy.mock.calls.length, 0);
    try {
      // The valid signature last: every bogus one is compared first.
      expect(await verifyWebhook(BODY, headersOf([...bogus, v.signature].join(' ')), v.secret, { now: NOW })).toBe(true);
      expect(hashes()).toBe(1);
      expect(await verifyWebhook(BODY, headersOf(bogus.join(' ')), [v.secret, 'my own secret'], { now: NOW })).toBe(false);
      expect(hashes()).toBe(3);
      await expect(constructWebhookEvent(BODY, headersOf(bogus.join(' ')), v.secret, { now: NOW })).rejects.toMatchObject({ code: 'signature_mismatch' });
      // A signature of another length than an HMAC-SHA256 (a truncated one) never matches, whatever its bytes.
      const truncated = `v1,${Buffer.from(v.signature.slice(3), 'base64').subarray(0, 16).toString('base64')}`;
      expect(await verifyWebhook(BODY, headersOf(truncated), v.secret, { now: NOW })).toBe(false);
      expect(await verifyWebhook(BODY, headersOf(`${truncated} ${v.signature}`), v.secret, { now: NOW })).toBe(true);
    } finally {
      for (const spy of hashed) spy.mockRestore();
    }
  });
});
