import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { builds, samplePayload } from '../test/support.js';
import { WebhookVerificationError, errorBody, type AuditPayload, type WebhookVerificationErrorCode } from './index.js';

const SECRET = 'whsec_test';
const hmac = (body: string | Buffer, secret = SECRET) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
const BODY = JSON.stringify(samplePayload);

describe.each(builds)('constructEvent ($name build)', ({ constructEvent }) => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date(samplePayload.timestamp));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  async function rejection(run: () => unknown): Promise<WebhookVerificationError> {
    try {
      await run();
    } catch (err) {
      expect(err).toBeInstanceOf(WebhookVerificationError);
      return err as WebhookVerificationError;
    }
    throw new Error('expected a WebhookVerificationError');
  }

  it('returns the typed payload of a signed delivery, from any body type', async () => {
    const bytes = Buffer.from(BODY);
    for (const body of [BODY, bytes, new Uint8Array(bytes).buffer]) {
      const event: AuditPayload = await constructEvent(body, hmac(BODY), SECRET);
      expect(event).toEqual(samplePayload);
      expect(event.test).toBeUndefined();
    }
  });

  it('keeps the test flag of a test delivery', async () => {
    const body = JSON.stringify({ ...samplePayload, test: true, request_id: 'test-1' });
    const event = await constructEvent(body, hmac(body), [`${SECRET}_new`, SECRET]);
    expect(event.test).toBe(true);
  });

  const cases: Array<[string, () => [string | Buffer, string | undefined], WebhookVerificationErrorCode, 400 | 401]> = [
    ['no header', () => [BODY, undefined], 'missing_signature', 401],
    ['empty header', () => [BODY, ''], 'missing_signature', 401],
    ['upper-case hex', () => [BODY, hmac(BODY).toUpperCase().replace('SHA256', 'sha256')], 'malformed_signature', 401],
    ['two values', () => [BODY, `${hmac(BODY)}, ${hmac(BODY)}`], 'malformed_signature', 401],
    ['wrong secret', () => [BODY, hmac(BODY, 'whsec_other')], 'signature_mismatch', 401],
    ['re-serialised JSON', () => [JSON.stringify(samplePayload, null, 2), hmac(BODY)], 'signature_mismatch', 401],
    ['signed non-JSON', () => ['not json', hmac('not json')], 'invalid_payload', 400],
    ['signed non-UTF-8 bytes', () => { const b = Buffer.from([0x7b, 0xff, 0x7d]); return [b, hmac(b)]; }, 'invalid_payload', 400],
    ['signed JSON array', () => ['[]', hmac('[]')], 'invalid_payload', 400],
    ['signed JSON null', () => ['null', hmac('null')], 'invalid_payload', 400],
    ['signed payload with a wrong field', () => { const b = JSON.stringify({ ...samplePayload, input_tokens: 1.5 }); return [b, hmac(b)]; }, 'invalid_payload', 400],
  ];

  it.each(cases)('%s → %s (%i)', async (_, make, code, status) => {
    const [body, header] = make();
    const err = await rejection(() => constructEvent(body, header, SECRET));
    expect(err.code).toBe(code);
    expect(err.status).toBe(status);
    expect(err.name).toBe('WebhookVerificationError');
    expect(errorBody(err)).toEqual({
      error: { message: err.message, type: status === 401 ? 'authentication_error' : 'invalid_request_error', code, param: null },
    });
  });

  it('names the offending field', async () => {
    const body = JSON.stringify({ ...samplePayload, user_id: 'nope' });
    expect((await rejection(() => constructEvent(body, hmac(body), SECRET))).message).toBe('Payload field "user_id" must be a UUID.');
  });

  it('checks the signature before parsing, so unsigned garbage is a mismatch, not a payload error', async () => {
    expect((await rejection(() => constructEvent('not json', hmac(BODY), SECRET))).code).toBe('signature_mismatch');
  });

  it('says so when the secret has whitespace around it (a pasted newline), and only then', async () => {
    const pasted = await rejection(() => constructEvent(BODY, hmac(BODY), [`${SECRET}\r\n`]));
    expect(pasted.code).toBe('signature_mismatch');
    expect(pasted.message).toMatch(/secret starts or ends with whitespace .*trim it/);
    expect((await rejection(() => constructEvent(BODY, hmac(BODY), 'another secret'))).message).not.toMatch(/whitespace/);
  });

  it.each([
    ['wrapped in quotes (docker run --env-file keeps them)', `"${SECRET}"`, /wrapped in quotes, which are then part of it .*remove them/],
    ['wrapped in single quotes', `'${SECRET}'`, /wrapped in quotes/],
    ['that is the API key, not the signing secret', 'sk-svc-18JOpJ4GtO3VT31VBnAM_rrcqnAbieEU8IP5famBQ7k', /is an svc API key \(sk-svc-…\), not the key's signing secret: use the whsec_… secret/],
  ])('says what is wrong with a secret %s, which otherwise read as a plain mismatch', async (_what, secret, note) => {
    const refusal = await rejection(() => constructEvent(BODY, hmac(BODY), ['whsec_new', secret]));
    expect(refusal.code).toBe('signature_mismatch');
    expect(refusal.message).toMatch(note);
    // A quote inside a secret, or at one end only, is a secret's own character.
    for (const own of ['whsec_a"b', '"whsec_ab', "whsec_ab'", '"']) {
      expect((await rejection(() => constructEvent(BODY, hmac(BODY), own))).message).not.toMatch(/quotes|API key/);
    }
  });

  it('names a body re-serialised on the way in (spaces, an escape, a newline after it) and where it differs, and only then', async () => {
    const signature = hmac(BODY);
    const note = (message: string) => /The body is not byte for byte what svc sends .* it differs at character (\d+), (.*?) where compact JSON has (.*?): a body parser or framework re-serialised it/.exec(message);
    // Python's json.dumps: a space after ':' and ','.
    const python = JSON.stringify(samplePayload).replaceAll('":', '": ').replaceAll(',"', ', "');
    const refusal = (await rejection(() => constructEvent(python, signature, SECRET))).message;
    const at = BODY.indexOf('":') + 2;
    expect(note(refusal)?.slice(1)).toEqual([String(at), '" "', JSON.stringify(BODY[at])]);
    // Receivers log the message: none of the body's text is in it (it holds prompts and answers).
    expect(refusal).not.toContain(samplePayload.prompt.slice(0, 12));
    const pretty = note((await rejection(() => constructEvent(Buffer.from(JSON.stringify(samplePayload, null, 2)), signature, SECRET))).message);
    expect(pretty?.slice(1)).toEqual(['1', '"\\n"', '"\\""']);
    expect(note((await rejection(() => constructEvent(`${BODY}\n`, signature, SECRET))).message)?.slice(1)).toEqual([String(BODY.length), '"\\n"', 'its end']);
    // Past 1 MiB a mismatched body is not parsed again to word the refusal.
    const big = JSON.stringify({ ...samplePayload, prompt: 'x'.repeat(1024 * 1024) }, null, 1);
    expect(note((await rejection(() => constructEvent(big, signature, SECRET))).message)).toBeNull();
    // The body as svc sends it, or not JSON at all: the cause is elsewhere.
    expect(note((await rejection(() => constructEvent(BODY, signature, 'another secret'))).message)).toBeNull();
    expect(note((await rejection(() => constructEvent('{"a":', signature, SECRET))).message)).toBeNull();
  });

  it("names a body still base64-encoded (a Lambda event.body with isBase64Encoded), and only then", async () => {
    const encoded = await rejection(() => constructEvent(Buffer.from(BODY).toString('base64'), hmac(BODY), SECRET));
    expect(encoded.code).toBe('signature_mismatch');
    expect(encoded.message).toContain("The body is base64-encoded JSON (AWS API Gateway or a Lambda function URL sets event.isBase64Encoded): verify the decoded bytes, Buffer.from(event.body, 'base64').");
    expect((await rejection(() => constructEvent('eyJ not base64', hmac(BODY), SECRET))).message).not.toContain('base64-encoded');
  });

  describe('toleranceSeconds', () => {
    it('accepts timestamps within the tolerance either way, and any timestamp without one', async () => {
      vi.setSystemTime(Date.parse(samplePayload.timestamp) + 300_000);
      expect(await constructEvent(BODY, hmac(BODY), SECRET, { toleranceSeconds: 300 })).toEqual(samplePayload);
      vi.setSystemTime(Date.parse(samplePayload.timestamp) - 300_000);
      expect(await constructEvent(BODY, hmac(BODY), SECRET, { toleranceSeconds: 300 })).toEqual(samplePayload);
      vi.setSystemTime(0);
      expect(await constructEvent(BODY, hmac(BODY), SECRET)).toEqual(samplePayload);
      expect(await constructEvent(BODY, hmac(BODY), SECRET, {})).toEqual(samplePayload);
    });

    it('rejects an old (replayed) or future delivery', async () => {
      for (const offset of [300_001, -300_001]) {
        vi.setSystemTime(Date.parse(samplePayload.timestamp) + offset);
        const err = await rejection(() => constructEvent(BODY, hmac(BODY), SECRET, { toleranceSeconds: 300 }));
        expect(err.code).toBe('timestamp_out_of_range');
        expect(err.status).toBe(400);
      }
    });

    it.each([-1, Number.NaN, Number.POSITIVE_INFINITY, '300'])('rejects toleranceSeconds %s as misuse', async (toleranceSeconds) => {
      await expect(async () => constructEvent(BODY, hmac(BODY), SECRET, { toleranceSeconds: toleranceSeconds as number })).rejects.toThrow(
        /toleranceSeconds must be a non-negative number/,
      );
    });
  });

  it('throws TypeError (not a verification error) for misuse, before looking at the header', async () => {
    // @ts-expect-error -- a parsed body cannot be verified.
    await expect(async () => constructEvent(samplePayload, undefined, SECRET)).rejects.toThrow(TypeError);
    await expect(async () => constructEvent(BODY, undefined, [])).rejects.toThrow(TypeError);
  });
});
