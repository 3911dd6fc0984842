import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkGrounding } from './index.js';
import { findLinks, urlKey } from './links.js';

const DOCS = 'The authentication guide is at https://docs.acmecorp.io/auth/login.';
const CONTACT = 'Write to support@acmecorp.io or call +1 (555) 123-4567 on weekdays.';

describe('links, e-mail addresses and phone numbers in answers', () => {
  it.each([
    ['a different web address', 'The authentication guide is at https://docs.acmecorp.io/auth.', 'https://docs.acmecorp.io/auth', 'link not in the sources'],
    ['another path in capitals', 'THE AUTHENTICATION GUIDE IS AT HTTPS://DOCS.ACMECORP.IO/AUTH/LOGOUT.', 'HTTPS://DOCS.ACMECORP.IO/AUTH/LOGOUT', 'link not in the sources'],
    ['a path in another case, not shouted', 'The authentication guide is at https://docs.acmecorp.io/Auth/Login.', 'https://docs.acmecorp.io/Auth/Login', 'link not in the sources'],
    ['another host', 'The authentication guide is at https://acmecorp.com/auth/login.', 'https://acmecorp.com/auth/login', 'link not in the sources'],
    ['a markdown link', 'The authentication guide is [here](https://docs.acmecorp.io/signin).', 'https://docs.acmecorp.io/signin', 'link not in the sources'],
    ['a link alone after "See"', 'See https://docs.acmecorp.io/sso for more.', 'https://docs.acmecorp.io/sso', 'link not in the sources'],
    ['a link on a line of its own', 'The guide:\nhttps://docs.acmecorp.io/guide', 'https://docs.acmecorp.io/guide', 'link not in the sources'],
    ['www. without a scheme', 'The authentication guide is at www.acmecorp.io/auth.', 'www.acmecorp.io/auth', 'link not in the sources'],
    ['an e-mail address', 'Write to help@acmecorp.io on weekdays.', 'help@acmecorp.io', 'e-mail address not in the sources'],
    ['a phone number', 'Call 555-123-4568 on weekdays.', '555-123-4568', 'phone number not in the sources'],
    ['an international phone number', 'Call +44 20 7946 0958 on weekdays.', '+44 20 7946 0958', 'phone number not in the sources'],
  ])('%s no source has is flagged, the span being the address', (_what, answer, span, reason) => {
    const r = checkGrounding({ sources: [DOCS, CONTACT], answer });
    expect(r.grounded, JSON.stringify(r.claims.map((c) => [c.text, c.score]))).toBe(false);
    expect(r.flaggedSpans.map((s) => [s.text, s.reason])).toContainEqual([span, reason]);
  });

  it.each([
    ['the same address', 'The authentication guide is at https://docs.acmecorp.io/auth/login.'],
    ['written with www. and a trailing slash', 'The authentication guide is at https://www.docs.acmecorp.io/auth/login/.'],
    ['without its scheme, after www.', 'The authentication guide is at www.docs.acmecorp.io/auth/login.'],
    ['with a fragment', 'The authentication guide is at https://docs.acmecorp.io/auth/login#tokens.'],
    ['in a markdown link', 'The authentication guide is [here](https://docs.acmecorp.io/auth/login).'],
    ['in angle brackets', 'The authentication guide is at <https://docs.acmecorp.io/auth/login>.'],
    ['shouted with the whole answer', 'THE AUTHENTICATION GUIDE IS AT HTTPS://DOCS.ACMECORP.IO/AUTH/LOGIN.'],
    ['the e-mail address in capitals', 'Write to SUPPORT@acmecorp.io on weekdays.'],
    ['the phone number without its country code', 'Call 555-123-4567 on weekdays.'],
    ['the phone number written another way', 'Call +1 555.123.4567 on weekdays.'],
  ])('%s that a source has is support', (_what, answer) => {
    const r = checkGrounding({ sources: [DOCS, CONTACT], answer });
    expect(r.grounded, JSON.stringify(r.claims.map((c) => [c.text, c.score]))).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
  });

  it.each([
    ['numbered marks', 'The authentication guide is documented [1].'],
    ['a cited page in brackets', 'The authentication guide is documented ([Source 1](https://example.org/doc/1)).'],
    ['a link after the sentence', 'The authentication guide is documented. [Acme docs](https://docs.acmecorp.io/auth/login)'],
    ['a link after "Source:"', 'The authentication guide is documented.\nSource: [Acme docs](https://docs.acmecorp.io/auth/login/)'],
    ['a list of sources', 'The authentication guide is documented.\n\nSources:\n1. https://docs.acmecorp.io/auth/login\n2. [Source 1](https://example.org/doc/1)'],
    ['a footnote', 'The authentication guide is documented.[^1]\n\n[^1]: https://example.org/doc/1'],
  ])('citation apparatus is not a claim of its sentence, and a cited page a source has is support: %s', (_what, answer) => {
    const r = checkGrounding({ sources: ['The authentication guide is documented.', DOCS, 'Document 1: https://example.org/doc/1'], answer });
    expect(r.grounded, JSON.stringify(r.claims.map((c) => [c.text, c.score]))).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
  });

  it.each([
    ['after the sentence', 'The refund window is 30 days. [Help Center](https://help.shopwise.example/refunds-policy)', 'https://help.shopwise.example/refunds-policy'],
    ['in brackets', 'The refund window is 30 days ([Policy](https://shopwise.example/legal/returns)).', 'https://shopwise.example/legal/returns'],
    ['after "Source:"', 'The refund window is 30 days.\nSource: [Returns FAQ](https://help.shopwise.example/faq/returns-2023)', 'https://help.shopwise.example/faq/returns-2023'],
    ['in a list of sources', 'The refund window is 30 days.\n\nSources:\n- https://help.shopwise.example/refunds\n- https://shopwise.example/legal/returns-policy', 'https://shopwise.example/legal/returns-policy'],
    ['in a footnote', 'The refund window is 30 days.[^1]\n\n[^1]: https://help.shopwise.example/faq/returns', 'https://help.shopwise.example/faq/returns'],
  ])('a cited page no source or question has is flagged as a made-up link: %s', (_what, answer, span) => {
    const sources = ['Customers can return items within 30 days. The refund window is 30 days.', 'Policy page: https://help.shopwise.example/refunds'];
    const r = checkGrounding({ sources, question: 'How long is the refund window?', answer });
    expect(r.grounded, JSON.stringify(r.claims.map((c) => [c.text, c.score]))).toBe(false);
    expect(r.flaggedSpans.map((s) => [s.text, s.reason])).toEqual([[span, 'link not in the sources']]);
    // The sentence it cites is still grounded on its own.
    expect(r.claims.find((c) => c.text.startsWith('The refund window'))?.grounded).toBe(true);
  });

  it('a link in the question is support', () => {
    const r = checkGrounding({ sources: [DOCS], question: 'Is https://status.acmecorp.io/ the status page?', answer: 'Yes, the status page is https://status.acmecorp.io.' });
    expect(r.flaggedSpans.map((s) => s.text)).not.toContain('https://status.acmecorp.io');
  });

  it('a link in a tool result (JSON) is support', () => {
    const r = checkGrounding({ sources: ['{"title":"Auth guide","url":"https://docs.acmecorp.io/auth?lang=en&v=2"}'], answer: 'The auth guide is at https://docs.acmecorp.io/auth?v=2&lang=en.' });
    expect(r.flaggedSpans).toEqual([]);
    expect(r.grounded).toBe(true);
  });
});

describe('findLinks', () => {
  it.each([
    ['See https://example.com/a/b).', [['url', 'https://example.com/a/b']]],
    ['(see https://en.wikipedia.org/wiki/Python_(programming_language)).', [['url', 'https://en.wikipedia.org/wiki/Python_(programming_language)']]],
    ['Mail jo.doe+x@mail.example.co.uk, please.', [['email', 'jo.doe+x@mail.example.co.uk']]],
    ['Call (555) 123-4567 or +49 30 1234567.', [['phone', '(555) 123-4567'], ['phone', '+49 30 1234567']]],
    // Dates, amounts, versions and ranges are numbers, not phone numbers.
    ['On 2023-10-15 it cost 1,234,567 dollars; v1.2.3; pages 100-2000; 555-1234.', []],
  ])('%s', (text, expected) => {
    expect(findLinks(text).map((l) => [l.kind, text.slice(l.start, l.end)])).toEqual(expected);
  });

  it('cuts a web address with 100,000 unbalanced ")" after it in one pass (each cut counted the brackets again: 24 s for 80,000)', () => {
    const text = `See https://example.com/a_(b)${')'.repeat(100_000)}.`;
    expect(findLinks(text).map((l) => text.slice(l.start, l.end))).toEqual(['https://example.com/a_(b)']);
  });

  it.each([
    ['https://www.Example.com/a/?b=2&a=1#top', 'example.com/a?a=1&b=2'],
    ['http://example.com', 'example.com'],
    ['www.example.com/Docs/', 'example.com/Docs'],
  ])('urlKey(%s) compares as %s', (url, key) => {
    expect(urlKey(url)).toBe(`\u0001url:${key}`);
  });
});

describe('links: properties', () => {
  const host = fc.stringMatching(/^[a-z]{3,10}\.(?:com|io|org)$/);
  const segment = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
  const path = fc.array(segment, { minLength: 0, maxLength: 3 }).map((s) => s.map((p) => `/${p}`).join(''));
  const sentence = (url: string) => `The product documentation is published at ${url}.`;
  const runs = { seed: 20261129, numRuns: 200 };

  it('a copied sentence with its link is grounded, whatever the link', () => {
    fc.assert(
      fc.property(host, path, (h, p) => {
        const s = sentence(`https://${h}${p}`);
        const r = checkGrounding({ sources: [s], answer: s });
        expect(r.grounded).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
      }),
      runs,
    );
  });

  it('the same sentence with another path or host is flagged at the link', () => {
    fc.assert(
      fc.property(host, path, segment, fc.boolean(), (h, p, extra, changeHost) => {
        const url = `https://${h}${p}`;
        const other = changeHost ? `https://x${h}${p}` : `https://${h}${p}/${extra}`;
        const r = checkGrounding({ sources: [sentence(url)], answer: sentence(other) });
        expect(r.grounded).toBe(false);
        expect(r.flaggedSpans.map((s) => s.text)).toEqual([other]);
      }),
      runs,
    );
  });
});
