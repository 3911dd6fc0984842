/** What a link of a text points at: a web address, an e-mail address or a phone number. */
export type LinkKind = 'url' | 'email' | 'phone' | 'code';

/** A web address, e-mail address or phone number in a text. */
export interface Link {
  kind: LinkKind;
  /** UTF-16 offsets into the text. */
  start: number;
  end: number;
  /** The keys a source holding it is indexed by. Keys start with "\u0001", which no word's stem does. */
  keys: string[];
  /** The keys an answer's link is looked up by: it is in the sources when they hold one of them. */
  lookups: string[];
  /** A name of code (`findCodeNames`): as written, looked for in the sources' text (`holdsCodeName`). */
  name?: string;
  /**
   * Spellings of a name of code any of which a source may hold for it (`name` among them): a chain of members whose
   * last are methods every value has is backed without them too (`files.list().data`: `files.list`).
   */
  names?: string[];
  /**
   * A method or function named by a plain word (`wait`, `delay`): found only where a source writes it as code, after a
   * "." or before a "(" (`job.wait(`, "`wait()`"), not as the word of a sentence ("until the result is ready").
   */
  codeOnly?: true;
}

// A web address with a scheme or "www.", up to white space or a character that never ends one in prose or JSON;
// trailing punctuation and an unbalanced ")" are cut off after (`trimUrl`).
const URL_RE = /\b(?:https?:\/\/|www\.)[^\s<>[\]{}"'`|\\]+/gi;
const EMAIL_RE = /(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.)+[A-Za-z]{2,24}\b/g;
// A phone number as people write one: international ("+44 20 7946 0958", "+1-555-123-4567"), with an area code in
// brackets ("(555) 123-4567"), or North American digits in groups of 3, 3 and 4 ("555-123-4567", "555.123.4567").
// Dates ("2023-10-15"), versions and amounts have other groupings.
const PHONE_RE =
  /(?<![\w+.,-])(?:\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){2,5}|\(\d{2,5}\)[ .-]?\d{2,5}(?:[ .-]\d{2,5}){0,3}|\d{3}([.-])\d{3}\1\d{4})(?![\w.,-]?\d)/g;

/** The web addresses, e-mail addresses and phone numbers of `text`, in order, never overlapping. */
export function findLinks(text: string): Link[] {
  const urls: Link[] = [];
  if (text.includes('://') || WWW_RE.test(text)) {
    for (const m of text.matchAll(URL_RE)) {
      const url = trimUrl(m[0]);
      if (url.length < 8) continue;
      const key = urlKey(url);
      // An answer in capitals shouts its addresses too ("HTTPS://EXAMPLE.ORG/REPORTS/2023.PDF"): such an address is
      // looked up without its case, which every source's address is also held by.
      const uncased = `\u0002${key.toLowerCase()}`;
      const shouted = /\p{Lu}/u.test(url) && !/\p{Ll}/u.test(url);
      urls.push({ kind: 'url', start: m.index, end: m.index + url.length, keys: [key, uncased], lookups: shouted ? [key, uncased] : [key] });
    }
  }
  // An address in a web address ("https://user@host") is part of it.
  let taken = urls;
  if (text.includes('@')) {
    const emails: Link[] = [];
    for (const m of text.matchAll(EMAIL_RE)) {
      if (overlaps(urls, m.index, m.index + m[0].length)) continue;
      const key = `\u0001mail:${m[0].toLowerCase()}`;
      emails.push({ kind: 'email', start: m.index, end: m.index + m[0].length, keys: [key], lookups: [key] });
    }
    if (emails.length > 0) taken = [...urls, ...emails].sort((a, b) => a.start - b.start);
  }
  const out = [...taken];
  for (const m of text.matchAll(PHONE_RE)) {
    const digits = m[0].replace(/\D/g, '');
    if (digits.length < 7 || digits.length > 15 || overlaps(taken, m.index, m.index + m[0].length)) continue;
    out.push({ kind: 'phone', start: m.index, end: m.index + m[0].length, ...phoneKeys(digits) });
  }
  return out.length === taken.length ? out : out.sort((a, b) => a.start - b.start);
}

const WWW_RE = /www\./i;

/** Whether `[start, end)` overlaps a link of `links` (ordered by start, never overlapping each other). */
function overlaps(links: readonly Link[], start: number, end: number): boolean {
  let lo = 0;
  let hi = links.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (links[mid]!.end <= start) lo = mid + 1;
    else hi = mid;
  }
  return lo < links.length && links[lo]!.start < end;
}

/** A web address without the punctuation that ends the sentence around it, or an unbalanced closing bracket. */
function trimUrl(url: string): string {
  // Counted once and kept up to date as characters are cut: counting at each cut makes a run of ")" cost its length squared.
  const opened = count(url, '(');
  let closed = count(url, ')');
  let end = url.length;
  for (;;) {
    const last = url[end - 1];
    if (last !== undefined && '.,;:!?*_~'.includes(last)) end--;
    else if (last === ')' && opened < closed) {
      end--;
      closed--;
    } else return url.slice(0, end);
  }
}

function count(s: string, ch: string): number {
  let n = 0;
  for (const c of s) if (c === ch) n++;
  return n;
}

/**
 * A web address as it is compared: without its scheme, "www.", fragment ("#…") and a trailing "/", the host in
 * lower case, the query's parameters sorted. "https://www.Example.com/a/?b=2&a=1#top" and
 * "example.com/a?a=1&b=2" are one address; the path keeps its case ("/Auth" is not "/auth").
 */
export function urlKey(url: string): string {
  let rest = url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  const hash = rest.indexOf('#');
  if (hash !== -1) rest = rest.slice(0, hash);
  const q = rest.indexOf('?');
  let query = '';
  if (q !== -1) {
    query = rest
      .slice(q + 1)
      .split('&')
      .filter((p) => p.length > 0)
      .sort()
      .join('&');
    rest = rest.slice(0, q);
  }
  const slash = rest.indexOf('/');
  let host = (slash === -1 ? rest : rest.slice(0, slash)).toLowerCase();
  if (host.startsWith('www.')) host = host.slice(4);
  let path = slash === -1 ? '' : rest.slice(slash);
  while (path.endsWith('/')) path = path.slice(0, -1);
  return `\u0001url:${host}${path}${query ? `?${query}` : ''}`;
}

/**
 * A phone number's keys. Two numbers are one when their digits are the same but for one to three leading digits
 * of the longer (a country code or a trunk "0"), seven digits or more left: "+1 (555) 123-4567" is
 * "555-123-4567", "+44 20 7946 0958" is "20 7946 0958". A source holds its digits whole ("=") and each such cut
 * (":"); an answer's number is looked up whole among the cuts, and cut among the whole ones.
 */
function phoneKeys(digits: string): { keys: string[]; lookups: string[] } {
  const keys = [`\u0001tel=${digits}`];
  const lookups = [`\u0001tel:${digits}`];
  for (let drop = 0; drop <= 3 && digits.length - drop >= 7; drop++) {
    keys.push(`\u0001tel:${digits.slice(drop)}`);
    if (drop > 0) lookups.push(`\u0001tel=${digits.slice(drop)}`);
  }
  return { keys, lookups };
}

/** What a flagged link's reason calls it. */
export const LINK_NAMES: Readonly<Record<LinkKind, string>> = { url: 'link', email: 'e-mail address', phone: 'phone number', code: 'code name' };

// Inline code on one line: `pool_size`, `/app/payments/client.py`.
const INLINE_CODE_RE = /(?<!`)`([^`\n]{1,200})`(?!`)/g;
// A run of the characters names in code are made of.
const CODE_RUN_RE = /[\w$@~./:-]+/g;
// What makes a run a name of code rather than a word: a path or member separator between two of its characters
// ("client.py", "payments/client", "std::fs", "page.next_cursor"), an underscore inside ("pool_size"), or a
// capital after a lower-case letter ("apiKey").
const CODE_NAME_RE = /[\w$@~-](?:\.|\/|::)[\w$@~-]|[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]/;

/**
 * The names of code an answer quotes in inline code (`` `pool_size` ``, `` `/app/payments/client.py` ``,
 * `` `page.next_cursor` ``): each is checked whole, as a link is, against the sources' text, so a changed file or
 * key is not backed by the words it shares with the right one. Numbers alone ("2.4") and plain words are read as
 * the rest of the answer is. `lookups` are the stems of its words, for finding its passage.
 */
export function findCodeNames(text: string, stemOf: (word: string) => string): Link[] {
  const out: Link[] = [];
  if (!text.includes('`')) return out;
  for (const m of text.matchAll(INLINE_CODE_RE)) {
    const from = m.index + 1;
    for (const r of m[1]!.matchAll(CODE_RUN_RE)) {
      let start = from + r.index;
      let end = start + r[0].length;
      // Not the punctuation around it: "pool_size:" is pool_size; a path keeps its start ("/app", "./run.sh", "~/.ssh").
      while (start < end && (/[:-]/.test(text[start]!) || (text[start] === '.' && !/[./]/.test(text[start + 1] ?? '')))) start++;
      while (end > start && /[.:/-]/.test(text[end - 1]!)) end--;
      const name = text.slice(start, end);
      if (!CODE_NAME_RE.test(name) || !/\p{L}/u.test(name) || name.includes('://')) continue;
      const words = name.match(/\p{L}[\p{L}\p{N}]*/gu) ?? [];
      out.push({ kind: 'code', start, end, keys: [], lookups: [...new Set(words.map((w) => stemOf(w.toLowerCase())))], name });
    }
  }
  return out;
}

/**
 * Whether any of `texts` holds code name `name` as written, not inside a longer name: "client.py" is in
 * "/app/payments/client.py", "pool_size" is not in "max_pool_size". `codeOnly`: only as a member or a call is
 * written, after a "." or before a "(".
 */
export function holdsCodeName(texts: readonly string[], name: string, codeOnly = false): boolean {
  for (const text of texts) {
    for (let at = text.indexOf(name); at !== -1; at = text.indexOf(name, at + 1)) {
      const before = text[at - 1] ?? ' ';
      const after = text[at + name.length] ?? ' ';
      if (CODE_CHAR_RE.test(before) || CODE_CHAR_RE.test(after)) continue;
      if (!codeOnly || before === '.' || after === '(') return true;
    }
  }
  return false;
}

const CODE_CHAR_RE = /[\w$]/;
