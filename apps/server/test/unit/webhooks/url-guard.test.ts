import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../src/http/errors.js';
import { blockedRange, isAllowedAddress, validateWebhookUrl, WebhookAddressRefusedError } from '../../../src/webhooks/url-guard.js';

describe('blockedRange', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.255', 'carrier-grade NAT'],
    ['224.0.0.251', 'multicast'],
    ['0.0.0.0', '"this network" (0.0.0.0/8)'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fd12:3456::1', 'unique local'],
    ['fc00::1', 'unique local'],
    ['fe80::1%eth0', 'link-local'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['64:ff9b::a00:1', 'private'],
    ['64:ff9b::7f00:1', 'loopback via IPv6 translation'],
    ['64:ff9b:1::a00:1', 'local-use NAT64'],
    ['64:ff9b:1:ffff::8.8.8.8', 'local-use NAT64'],
    ['::ffff:0:127.0.0.1', 'loopback via IPv6 translation'],
    ['::ffff:0:a9fe:a9fe', 'link-local'],
    ['::ffff:0:10.0.0.1', 'private'],
    ['::127.0.0.1', 'loopback via IPv6 translation'],
    ['2002:7f00:1::', 'loopback via IPv6 translation'],
    ['2002:a9fe:a9fe::1', 'link-local'],
    ['2002:c0a8:101::1', 'private'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    ['2001::1', 'Teredo'],
  ])('refuses %s (%s)', (address, range) => {
    expect(blockedRange(address)).toBe(range);
  });

  it.each(['93.184.216.34', '8.8.8.8', '100.128.0.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2001:4860::8888'])('allows public %s', (address) => {
    expect(blockedRange(address)).toBeUndefined();
  });
});

describe('isAllowedAddress per SVC_WEBHOOK_ALLOW_PRIVATE (design §2)', () => {
  // [address, false, 'loopback', true]
  it.each([
    ['8.8.8.8', true, true, true],
    ['127.0.0.1', false, true, true],
    ['::1', false, true, true],
    ['::ffff:127.0.0.1', false, true, true],
    ['::ffff:0:127.0.0.1', false, false, true],
    ['64:ff9b::127.0.0.1', false, false, true],
    ['2002:7f00:1::', false, false, true],
    ['10.0.0.1', false, false, true],
    ['192.168.1.1', false, false, true],
    ['fd00::1', false, false, true],
    ['169.254.169.254', false, false, true],
    ['::ffff:169.254.169.254', false, false, true],
    ['fe80::1', false, false, true],
    ['0.0.0.0', false, false, true],
  ] as const)('%s: false → %s, loopback → %s, true → %s', (address, strict, loopback, open) => {
    expect([isAllowedAddress(address, false), isAllowedAddress(address, 'loopback'), isAllowedAddress(address, true)]).toEqual([strict, loopback, open]);
  });
});

describe('validateWebhookUrl', () => {
  const strict = { allowPrivate: false };

  it('returns the WHATWG-normalised URL', async () => {
    await expect(validateWebhookUrl('HTTPS://Example.COM/hooks?a=1', strict)).resolves.toBe('https://example.com/hooks?a=1');
  });

  it.each([
    ['ftp://example.com/', /http or https/],
    ['not a url', /not a valid URL/],
    ['https://user:pass@example.com/', /credentials/],
    [`https://example.com/${'a'.repeat(2048)}`, /maximum is 2048/],
    ['http://127.0.0.1/', /loopback/],
    ['http://2130706433/', /127\.0\.0\.1, a loopback/],
    ['http://0x7f.1/', /127\.0\.0\.1/],
    ['http://0177.0.0.1/', /127\.0\.0\.1/],
    ['http://[::ffff:127.0.0.1]/', /loopback/],
    ['http://169.254.169.254/latest/meta-data', /link-local/],
    ['http://[fd00::1]/', /unique local/],
    ['http://[::ffff:0:127.0.0.1]/', /loopback via IPv6 translation/],
    ['http://[64:ff9b::7f00:1]/', /loopback via IPv6 translation/],
    ['http://[64:ff9b:1::a00:1]/', /local-use NAT64/],
    ['http://[2002:a00:1::1]/', /private/],
    ['http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', /Teredo/],
  ])('rejects %s', async (url, message) => {
    const error = await validateWebhookUrl(url, strict).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).toBody().error).toMatchObject({ code: 'invalid_value', param: 'webhook_url', message: expect.stringMatching(message) });
  });

  it('quotes an invalid URL from its first characters, not whole (fuzz-routes seed 1)', async () => {
    const text = 'x'.repeat(2048);
    const error = (await validateWebhookUrl(text, strict).catch((err: unknown) => err)) as ApiError;
    expect(error.message).toMatch(/^'x{128}…' is not a valid URL\.$/);
  });

  it('quotes a scheme other than http or https from its first characters, not whole', async () => {
    const error = (await validateWebhookUrl(`${'x'.repeat(2000)}://example.com/`, strict).catch((err: unknown) => err)) as ApiError;
    expect(error.message).toMatch(/^The webhook URL must use http or https, not x{128}…\.$/);
  });

  it('with allowPrivate loopback, accepts loopback literals and refuses private and link-local ones', async () => {
    await expect(validateWebhookUrl('http://127.0.0.1:9000/h', { allowPrivate: 'loopback' })).resolves.toBe('http://127.0.0.1:9000/h');
    await expect(validateWebhookUrl('http://[::1]:9000/h', { allowPrivate: 'loopback' })).resolves.toBe('http://[::1]:9000/h');
    for (const url of ['http://10.0.0.1/h', 'http://169.254.169.254/latest/meta-data', 'http://[fe80::1]/h', 'http://[::ffff:0:127.0.0.1]/h']) {
      await expect(validateWebhookUrl(url, { allowPrivate: 'loopback' }), url).rejects.toThrow(/only true, set by its operator, would allow it/);
    }
  });

  it('names the range with its article: "an unspecified address", "a loopback address"', async () => {
    await expect(validateWebhookUrl('http://[::]/h', strict)).rejects.toThrow(/points at ::, an unspecified address;/);
    await expect(validateWebhookUrl('http://[fd00::1]/h', strict)).rejects.toThrow(/points at fd00::1, a unique local address;/);
    await expect(validateWebhookUrl('http://127.0.0.1/h', strict)).rejects.toThrow(/points at 127\.0\.0\.1, a loopback address;/);
    expect(new WebhookAddressRefusedError('zero.example', '0.0.0.0', 'IETF protocol assignment').message).toMatch(/resolves to 0\.0\.0\.0, an IETF protocol assignment address/);
  });

  it('accepts private literals when allowPrivate is on, and names (checked at send time) always', async () => {
    await expect(validateWebhookUrl('http://127.0.0.1:9000/h', { allowPrivate: true })).resolves.toBe('http://127.0.0.1:9000/h');
    await expect(validateWebhookUrl('http://localhost:9000/h', strict)).resolves.toBe('http://localhost:9000/h');
  });
});
