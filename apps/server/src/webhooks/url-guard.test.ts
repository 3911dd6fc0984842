import { describe, expect, it } from 'vitest';
import { ApiError } from '../http/errors.js';
import { blockedRange, validateWebhookUrl } from './url-guard.js';

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
    ['2002:7f00:1::', 'loopback'],
  ])('refuses %s (%s)', (address, range) => {
    expect(blockedRange(address)).toBe(range);
  });

  it.each(['93.184.216.34', '8.8.8.8', '100.128.0.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])('allows public %s', (address) => {
    expect(blockedRange(address)).toBeUndefined();
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
  ])('rejects %s', async (url, message) => {
    const error = await validateWebhookUrl(url, strict).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).toBody().error).toMatchObject({ code: 'invalid_value', param: 'webhook_url', message: expect.stringMatching(message) });
  });

  it('accepts private literals when allowPrivate is on, and names (checked at send time) always', async () => {
    await expect(validateWebhookUrl('http://127.0.0.1:9000/h', { allowPrivate: true })).resolves.toBe('http://127.0.0.1:9000/h');
    await expect(validateWebhookUrl('http://localhost:9000/h', strict)).resolves.toBe('http://localhost:9000/h');
  });
});
