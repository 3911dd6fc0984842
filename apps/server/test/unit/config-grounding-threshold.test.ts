import { describe, expect, it } from 'vitest';
import { DEFAULT_GROUNDING_THRESHOLD } from '@svc/grounding';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('SVC_GROUNDING_THRESHOLD', () => {
  it('defaults to the check’s own threshold', () => {
    expect(loadConfig({}).groundingThreshold).toBe(DEFAULT_GROUNDING_THRESHOLD);
    expect(DEFAULT_GROUNDING_THRESHOLD).toBe(0.5);
  });

  it.each([
    ['0.23', 0.23],
    ['0.83', 0.83],
    ['.5', 0.5],
    ['0.0001', 0.0001],
    ['0.9999', 0.9999],
  ])('reads %s', (text, value) => {
    expect(loadConfig({ SVC_GROUNDING_THRESHOLD: text }).groundingThreshold).toBe(value);
  });

  it.each([
    ['0', /greater than 0 and less than 1/],
    ['1', /greater than 0 and less than 1/],
    ['-0.2', /greater than 0 and less than 1/],
    ['23', /greater than 0 and less than 1/],
    ['abc', /must be a number between 0 and 1/],
    ['0.5x', /must be a number between 0 and 1/],
  ])('refuses %s with a message naming the setting', (text, message) => {
    let error: unknown;
    try {
      loadConfig({ SVC_GROUNDING_THRESHOLD: text });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toHaveLength(1);
    expect((error as ConfigError).problems[0]).toMatch(/^SVC_GROUNDING_THRESHOLD: /);
    expect((error as ConfigError).problems[0]).toMatch(message);
  });
});
