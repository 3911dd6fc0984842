import { describe, expect, it } from 'vitest';
import { checkablePattern } from '../../../src/upstream/json-schema.js';

describe('checkablePattern', () => {
  it.each([['^(a+)+$'], ['(a|a)*b'], ['^(\\w+\\s?)*$'], ['((ab)*c)+'], ['(x+x+)+y'], ['(a{1,}){2,}']])(
    'leaves unchecked a pattern that backtracks exponentially: %s',
    (pattern) => {
      expect(checkablePattern(pattern)).toBeNull();
    },
  );

  it.each([['^[a-z]+$'], ['^\\d{3}-\\d{4}$'], ['^(foo|bar)$'], ['^[A-Z]{2}(\\d{2})?$'], ['^(\\+|-)?\\d+$'], ['[(a+)+]']])(
    'checks an ordinary pattern: %s',
    (pattern) => {
      expect(checkablePattern(pattern)).toBeInstanceOf(RegExp);
    },
  );

  it('leaves an invalid pattern unchecked', () => {
    expect(checkablePattern('(')).toBeNull();
  });
});
