import { describe, expect, it } from 'vitest';
import { ConcurrencyGate } from '../../../src/auth/concurrency-gate.js';

describe('ConcurrencyGate', () => {
  it('lets `limit` in, turns the next away at once, and has room again after a release', () => {
    const gate = new ConcurrencyGate(2);
    const a = gate.tryEnter();
    const b = gate.tryEnter();
    expect(a).toBeTypeOf('function');
    expect(b).toBeTypeOf('function');
    expect(gate.tryEnter()).toBeUndefined();
    a!();
    a!(); // a second release of the same hold is ignored
    expect(gate.inUse).toBe(1);
    expect(gate.tryEnter()).toBeTypeOf('function');
    expect(gate.tryEnter()).toBeUndefined();
  });

  it('rejects a limit that is not a positive integer', () => {
    expect(() => new ConcurrencyGate(0)).toThrow(TypeError);
    expect(() => new ConcurrencyGate(1.5)).toThrow(TypeError);
  });
});
