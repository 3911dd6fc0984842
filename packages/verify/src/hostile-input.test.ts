import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { describe, expect, it, vi } from 'vitest';
import { builds, samplePayload } from '../test/support.js';
import { WebhookVerificationError, webhookKey } from './index.js';

/**
 * What anyone on the internet can send a receiver, fed to both builds' functions: hostile `webhook-*` headers (thousands
 * of `v1,` entries, megabyte values, timestamps such as 1e308, -1, `0x10` or ` 17…`, base64 that is not, unicode ids,
 * names in odd case, a repeated header as node and Fetch join it) and bodies (not UTF-8, empty, megabytes). A delivery
 * is accepted exactly when one of its `v1` entries is the HMAC of `{id}.{timestamp}.{body}` (the `standardwebhooks`
 * and `svix` libraries, or node's HMAC for bytes those libraries decode first, say which); anything else is refused
 * with a `WebhookVerificationError` whose message quotes no more than 128 characters of what was sent. Seeded, so that
 * a failure replays; SVC_FUZZ_SEED explores others.
 */
const SEED = Number(process.env.SVC_FUZZ_SEED ?? 20261201);
const runs = (offset: number, numRuns: number) => ({ seed: SEED + offset, numRuns });

const NOW_SECONDS = 1_767_225_600; // 2026-01-01
const NOW = NOW_SECONDS * 1000;
const QUOTED_CHARS = 128;
const CODES = new Set(['missing_signature', 'malformed_signature', 'signature_mismatch', 'invalid_payload', 'timestamp_out_of_range']);

const secretArb = fc.oneof(
  fc.uint8Array({ minLength: 24, maxLength: 32 }).map((bytes) => `whsec_${Buffer.from(bytes).toString('base64')}`),
  fc.string({ minLength: 1, maxLength: 40 }),
);
const idArb = fc.oneof(
  fc.constant('whd_0193a1b2c3d4e5f60718293a4b5c6d7e'),
  fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }),
  fc.string({ minLength: 1, maxLength: 20, unit: 'binary' }),
  fc.constant('x'.repeat(1024 * 1024)),
);
/** Bodies: svc's JSON, text with any code points, bytes that are not UTF-8, nothing, a megabyte. */
const bodyArb = fc.oneof(
  fc.constant(JSON.stringify(samplePayload)),
  fc.string({ maxLength: 200, unit: 'binary' }),
  fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)),
  fc.constantFrom('', Buffer.alloc(0), Buffer.from([0xff, 0xfe, 0x7b, 0x7d]), Buffer.alloc(1024 * 1024, 0xc3)),
);
/** Timestamps that are not whole unix seconds near now, or are written oddly. */
const badTimestampArb = fc.oneof(
  fc.constantFrom('1e308', '-1', '-0', '0x10', 'NaN', 'Infinity', '', ' ', '1767225600.5', '+1767225600', '１７６７２２５６００', '0001767225600', '9'.repeat(400)),
  fc.string({ maxLength: 20 }),
  fc.integer({ min: 0, max: NOW_SECONDS - 301 }).map(String),
  fc.integer({ min: NOW_SECONDS + 301, max: 999_999_999_999 }).map(String),
);
const base64Of = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
/** `webhook-signature` entries that sign nothing here: random v1 digests, other versions, malformed base64, junk. */
const junkEntryArb = fc.oneof(
  fc.uint8Array({ minLength: 32, maxLength: 32 }).map((d) => `v1,${base64Of(d)}`),
  fc.uint8Array({ minLength: 32, maxLength: 32 }).map((d) => `v1a,${base64Of(d)}`),
  fc.constantFrom('v1,', 'v1', ',', 'v1,!!!!', `v1,${'A'.repeat(43)}`, `v1,${'A'.repeat(42)}=A`, `v1,${'A'.repeat(44)}==`, `v2,${'A'.repeat(43)}=`, `V1,${'A'.repeat(43)}=`),
  fc.string({ maxLength: 60, unit: 'binary' }),
);
const manyEntriesArb = fc.oneof(
  fc.array(junkEntryArb, { maxLength: 8 }),
  fc.integer({ min: 1000, max: 4000 }).map((n) => Array.from({ length: n }, (_, i) => (i % 2 ? 'v1,' : `v1,${'B'.repeat(43)}=`))),
  fc.constant(['v1,' + 'A'.repeat(1024 * 1024)]),
);
/** How the entries of one header, or of a header sent several times, arrive. */
const joinArb = fc.constantFrom(' ', ', ', '  ');

type Container = 'record' | 'odd-case record' | 'map' | 'Headers';
const containerArb = fc.constantFrom<Container>('record', 'odd-case record', 'map', 'Headers');

function headersIn(container: Container, values: Record<string, string>): unknown {
  if (container === 'record') return values;
  if (container === 'odd-case record') return Object.fromEntries(Object.entries(values).map(([k, v]) => [k.replace(/(^|-)(\w)/g, (m) => m.toUpperCase()), v]));
  if (container === 'map') return new Map(Object.entries(values).map(([k, v]) => [k.toUpperCase(), v]));
  try {
    const headers = new Headers(values);
    // Fetch trims a value's ends; such a value never reaches a Fetch receiver as it was signed.
    if (Object.entries(values).every(([k, v]) => headers.get(k) === v)) return headers;
  } catch {
    // Not a ByteString: Fetch refuses it before any receiver could see it.
  }
  return values;
}

const bytesOf = (body: string | Buffer) => (typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
/** The `v1` entry svc sends, by node's HMAC over the raw bytes (the oracle, apart from the code under test). */
const v1 = (secret: string, id: string, timestamp: string, body: string | Buffer) =>
  `v1,${createHmac('sha256', webhookKey(secret)).update(`${id}.${timestamp}.`).update(bytesOf(body)).digest('base64')}`;

/** Every run of more than 128 characters of `value` that `message` holds: none, when values are quoted cut short. */
function echoes(message: string, values: readonly string[]): boolean {
  return values.some((v) => {
    if (v.length <= QUOTED_CHARS) return false;
    for (let at = 0; at + QUOTED_CHARS < v.length; at += QUOTED_CHARS) if (message.includes(v.slice(at, at + QUOTED_CHARS + 1))) return true;
    return false;
  });
}

/** Calls `fn`; a refusal must be a WebhookVerificationError with a known code and a bounded message. */
async function refusal(fn: () => unknown, sent: readonly string[]): Promise<WebhookVerificationError | 'accepted'> {
  try {
    await fn();
    return 'accepted';
  } catch (err) {
    if (!(err instanceof WebhookVerificationError)) throw err;
    expect(CODES.has(err.code), err.code).toBe(true);
    expect(err.message.length).toBeLessThan(1_200);
    expect(echoes(err.message, sent), err.message.slice(0, 300)).toBe(false);
    return err;
  }
}

describe.each(builds)('hostile Standard Webhooks deliveries ($name build)', ({ verifyWebhook, constructWebhookEvent }) => {
  it('never accepts a delivery whose entries sign nothing, nor one with a bad or stale timestamp; refusals are WebhookVerificationErrors quoting ≤128 characters', async () => {
    await fc.assert(
      fc.asyncProperty(
        secretArb,
        idArb,
        bodyArb,
        fc.oneof(fc.constant(String(NOW_SECONDS)), badTimestampArb),
        manyEntriesArb,
        joinArb,
        containerArb,
        fc.boolean(),
        async (secret, id, body, timestamp, entries, join, container, withGoodOneOnBadTimestamp) => {
          // Either no entry signs the delivery, or the right one is there but the timestamp is unusable.
          const good = /^\d{1,12}$/.test(timestamp) && Number(timestamp) !== NOW_SECONDS && withGoodOneOnBadTimestamp;
          const signature = [...entries, ...(good ? [v1(secret, id, String(Number(timestamp)), body)] : [])].join(join);
          const headers = headersIn(container, { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature });
          const options = { now: NOW };
          expect(await verifyWebhook(body, headers as never, secret, options)).toBe(false);
          const refused = await refusal(() => constructWebhookEvent(body, headers as never, secret, options), [id, timestamp, signature]);
          expect(refused).toBeInstanceOf(WebhookVerificationError);
        },
      ),
      runs(1, 150),
    );
  });

  it('accepts the one good entry wherever it sits among hostile ones, in any header shape or case, as standardwebhooks and svix do', async () => {
    await fc.assert(
      fc.asyncProperty(
        secretArb,
        idArb,
        bodyArb,
        fc.integer({ min: NOW_SECONDS - 300, max: NOW_SECONDS + 300 }),
        fc.array(junkEntryArb, { maxLength: 6 }),
        fc.nat(),
        joinArb,
        containerArb,
        async (secret, id, body, timestamp, junk, at, join, container) => {
          const entries = [...junk];
          entries.splice(at % (junk.length + 1), 0, v1(secret, id, String(timestamp), body));
          const values = { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': entries.join(join) };
          const headers = headersIn(container, values);
          expect(await verifyWebhook(body, headers as never, secret, { now: NOW })).toBe(true);
          // The libraries verify a text body (they decode bytes first, so bytes that are not UTF-8 are not theirs to judge).
          if (typeof body === 'string' && secret.startsWith('whsec_') && !(headers instanceof Map)) {
            vi.setSystemTime(NOW);
            try {
              const plain = headers instanceof Headers ? Object.fromEntries(headers) : (headers as Record<string, string>);
              expect(() => new StandardWebhook(secret).verify(body, plain, { jsonParse: false })).not.toThrow();
              if (body === JSON.stringify(samplePayload)) expect(new SvixWebhook(secret).verify(body, plain)).toEqual(samplePayload);
            } finally {
              vi.useRealTimers();
            }
          }
        },
      ),
      runs(2, 150),
    );
  });

  it('refuses exactly what standardwebhooks refuses among deliveries svc could send, a repeated webhook-signature header included', async () => {
    await fc.assert(
      fc.asyncProperty(
        secretArb.filter((s) => s.startsWith('whsec_')),
        fc.constantFrom('whd_0193a1b2c3d4e5f60718293a4b5c6d7e', 'msg_2mOn0VxKfLbSTOHL5o9NE2wHRj5'),
        fc.integer({ min: NOW_SECONDS - 600, max: NOW_SECONDS + 600 }),
        fc.array(fc.oneof(fc.constant('good'), fc.constant('other secret'), fc.constant('other body')), { minLength: 1, maxLength: 4 }),
        fc.constantFrom(' ', ', '),
        async (secret, id, timestamp, kinds, join) => {
          const body = JSON.stringify(samplePayload);
          const entry = (kind: string) =>
            kind === 'good' ? v1(secret, id, String(timestamp), body) : kind === 'other secret' ? v1(`${secret}x`, id, String(timestamp), body) : v1(secret, id, String(timestamp), `${body} `);
          const headers = { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': kinds.map(entry).join(join) };
          vi.setSystemTime(NOW);
          let theirs: boolean;
          try {
            new StandardWebhook(secret).verify(body, headers);
            theirs = true;
          } catch {
            theirs = false;
          } finally {
            vi.useRealTimers();
          }
          expect(await verifyWebhook(body, headers, secret, { now: NOW })).toBe(theirs);
        },
      ),
      runs(3, 100),
    );
  });
});

describe.each(builds)('hostile X-Svc-Signature deliveries ($name build)', ({ verifySignature, constructEvent }) => {
  it('accepts only sha256=<the HMAC of the raw bytes>; refuses anything else without an error other than WebhookVerificationError', async () => {
    const headerArb = fc.oneof(
      fc.string({ maxLength: 100, unit: 'binary' }),
      fc.constantFrom('sha256=', `sha256=${'0'.repeat(64)}`, `SHA256=${'a'.repeat(64)}`, `sha256=${'A'.repeat(64)}`, `sha256=${'a'.repeat(63)}g`, `sha256=${'a'.repeat(64)} `),
      fc.constant(`sha256=${'a'.repeat(1024 * 1024)}`),
    );
    await fc.assert(
      fc.asyncProperty(secretArb, bodyArb, headerArb, fc.boolean(), async (secret, body, header, good) => {
        const expected = `sha256=${createHmac('sha256', secret).update(bytesOf(body)).digest('hex')}`;
        const sent = good ? expected : header;
        expect(await verifySignature(body, sent, secret)).toBe(sent === expected);
        const outcome = await refusal(() => constructEvent(body, sent, secret), [sent]);
        if (sent !== expected) expect(outcome).toBeInstanceOf(WebhookVerificationError);
        else if (outcome !== 'accepted') expect(outcome.code).toBe('invalid_payload');
      }),
      runs(4, 150),
    );
  });
});

/** What one verification hashed: HMACs computed (Web Crypto sign or verify) and the bytes fed to them. */
function countingHashes() {
  const counts = { hmacs: 0, bytes: 0 };
  const subtleSign = crypto.subtle.sign.bind(crypto.subtle);
  const subtleVerify = crypto.subtle.verify.bind(crypto.subtle);
  const spies = [
    vi.spyOn(crypto.subtle, 'sign').mockImplementation(async (algorithm, key, data) => {
      counts.hmacs++;
      counts.bytes += (data as ArrayBufferView).byteLength;
      return subtleSign(algorithm, key, data);
    }),
    // An HMAC too: one per signature would hash the body once per entry.
    vi.spyOn(crypto.subtle, 'verify').mockImplementation(async (algorithm, key, signature, data) => {
      counts.hmacs++;
      counts.bytes += (data as ArrayBufferView).byteLength;
      return subtleVerify(algorithm, key, signature, data);
    }),
  ];
  return { counts, restore: () => spies.forEach((spy) => spy.mockRestore()) };
}

describe('bounded work on a hostile webhook-signature (web build; the node build hashes per secret the same way)', () => {
  const web = builds[1];
  it('hashes the body once per secret however many v1 entries the header carries', async () => {
    const secret = 'whsec_' + Buffer.alloc(24, 1).toString('base64');
    const body = Buffer.alloc(64 * 1024, 'a');
    const perRung: Array<{ entries: number; hmacs: number; bytes: number }> = [];
    for (const entries of [1, 10, 100, 1000, 10_000]) {
      const signature = Array.from({ length: entries }, () => `v1,${'C'.repeat(43)}=`).join(' ');
      const { counts, restore } = countingHashes();
      try {
        expect(await web.verifyWebhook(body, { 'webhook-id': 'a', 'webhook-timestamp': String(NOW_SECONDS), 'webhook-signature': signature }, [secret, 'other'], { now: NOW })).toBe(false);
      } finally {
        restore();
      }
      perRung.push({ entries, ...counts });
    }
    // Two secrets: two HMACs over the same bytes on every rung.
    for (const rung of perRung) expect(rung, JSON.stringify(perRung)).toMatchObject({ hmacs: 2, bytes: perRung[0]!.bytes });
  });
});
