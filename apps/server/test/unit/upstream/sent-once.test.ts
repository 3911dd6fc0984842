import { describe, expect, it } from 'vitest';
import { sentOnce } from '../../../src/upstream/sent-once.js';

describe('sentOnce', () => {
  it('yields the text once; a second read (a replay) throws a named cause', () => {
    const body = sentOnce('{"model":"m"}');
    expect([...body]).toEqual(['{"model":"m"}']);
    expect(() => [...body]).toThrow('request body was already sent; svc does not replay upstream calls');
  });
});
