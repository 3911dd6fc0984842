import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createDeliveryLog, readDeliveryLog, type LoggedDelivery } from '../src/delivery-log.js';

const good: LoggedDelivery = {
  time: '2026-01-01T12:03:04.000Z',
  id: 'whd_1',
  event: 'llm.request.completed',
  method: 'POST',
  url: 'http://127.0.0.1:4000/',
  headers: { 'content-type': 'application/json', 'x-svc-delivery': 'whd_1' },
  body_base64: Buffer.from('{"a":1}').toString('base64'),
  signature: 'valid',
  status: 200,
};

describe('readDeliveryLog', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  /** Writes `lines` to a log and reads it back: the entries kept and the warnings printed. */
  async function read(lines: string[]): Promise<{ entries: LoggedDelivery[]; warnings: string }> {
    const dir = mkdtempSync(join(tmpdir(), 'svc-log-'));
    dirs.push(dir);
    const file = join(dir, 'log.jsonl');
    writeFileSync(file, `${lines.join('\n')}\n`);
    let warnings = '';
    const entries = await readDeliveryLog(file, { err: (text) => void (warnings += text) });
    return { entries, warnings: warnings.replaceAll(file, 'LOG') };
  }

  it('keeps well-formed entries: a null id or event, a header given as a list of strings', async () => {
    const listed = { ...good, id: null, event: null, headers: { 'x-svc-event': ['a', 'b'] } };
    const { entries, warnings } = await read([JSON.stringify(good), '', JSON.stringify(listed)]);
    expect(entries).toEqual([good, listed]);
    expect(warnings).toBe('');
  });

  it.each<[string, string, string]>([
    ['a line cut short', JSON.stringify(good).slice(0, 40), 'not JSON'],
    ['an array', '[1,2]', 'not a JSON object'],
    ['null', 'null', 'not a JSON object'],
    ['a numeric id', JSON.stringify({ ...good, id: 12345678 }), 'id is not a string or null'],
    ['a numeric X-Svc-Delivery', JSON.stringify({ ...good, headers: { 'x-svc-delivery': 12345678 } }), 'header "x-svc-delivery" is not a string or a list of strings'],
    ['a header list with a number', JSON.stringify({ ...good, headers: { accept: ['a', 1] } }), 'header "accept" is not a string or a list of strings'],
    ['headers as a list', JSON.stringify({ ...good, headers: ['content-type'] }), 'headers is not an object'],
    ['headers null', JSON.stringify({ ...good, headers: null }), 'headers is not an object'],
    ['no url', JSON.stringify({ ...good, url: undefined }), 'url is not a non-empty string'],
    ['a numeric url', JSON.stringify({ ...good, url: 7 }), 'url is not a non-empty string'],
    ['a body that is not base64', JSON.stringify({ ...good, body_base64: 'not base64!' }), 'body_base64 is not base64'],
    ['a numeric body', JSON.stringify({ ...good, body_base64: 5 }), 'body_base64 is not base64'],
    ['a numeric time', JSON.stringify({ ...good, time: 5 }), 'time is not a string'],
    ['a numeric event', JSON.stringify({ ...good, event: 5 }), 'event is not a string or null'],
    ['no method', JSON.stringify({ ...good, method: undefined }), 'method is not a string'],
    ['an unknown signature verdict', JSON.stringify({ ...good, signature: 'maybe' }), 'signature is not "valid", "invalid" or "unchecked"'],
    ['a status as text', JSON.stringify({ ...good, status: '200' }), 'status is not a whole number'],
  ])('skips %s with a warning naming its line; the rest is kept', async (_name, bad, problem) => {
    const { entries, warnings } = await read([JSON.stringify(good), bad, JSON.stringify({ ...good, id: 'whd_2' })]);
    expect(entries.map((e) => e.id)).toEqual(['whd_1', 'whd_2']);
    expect(warnings).toBe(`skipped line 2 of LOG: ${problem}\n`);
  });

  it('keeps the entry glued to a line cut short (a log appended to after a crash by earlier versions)', async () => {
    const { entries, warnings } = await read([JSON.stringify(good) + JSON.stringify(good).slice(0, 60) + JSON.stringify({ ...good, id: 'whd_2' })]);
    expect(entries.map((e) => e.id)).toEqual(['whd_2']);
    expect(warnings).toBe('skipped the start of line 1 of LOG: cut short; the entry after it is kept\n');
  });

  it('prints a header name from the log escaped', async () => {
    const { warnings } = await read([JSON.stringify({ ...good, headers: { '\u001b[2J': 1 } })]);
    expect(warnings).toBe('skipped line 1 of LOG: header "\\u001b[2J" is not a string or a list of strings\n');
  });
});

describe('createDeliveryLog', () => {
  it('after a line cut short (listen killed mid-write), the next delivery starts a line of its own: replay --last 1 finds it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-log-'));
    try {
      const file = join(dir, 'log.jsonl');
      writeFileSync(file, `${JSON.stringify(good)}\n${JSON.stringify(good).slice(0, 50)}`);
      const log = createDeliveryLog(file);
      await log.append({ ...good, id: 'whd_2' });
      await log.append({ ...good, id: 'whd_3' });
      expect(readFileSync(file, 'utf8').split('\n')).toHaveLength(5);
      let warnings = '';
      const entries = await readDeliveryLog(file, { err: (text) => void (warnings += text) });
      expect(entries.map((e) => e.id)).toEqual(['whd_1', 'whd_2', 'whd_3']);
      expect(warnings).toBe(`skipped line 2 of ${file}: not JSON\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
