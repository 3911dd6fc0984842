import { describe, expect, it } from 'vitest';
import { Cancellation, type CallSignal } from '../../../src/upstream/upstream.js';

describe('Cancellation', () => {
  it('runs each listener once, at the first abort, with the reason readable', () => {
    const c = new Cancellation();
    const calls: string[] = [];
    const a = () => calls.push(`a:${String(c.reason)}`);
    const b = () => calls.push('b');
    c.addEventListener('abort', a);
    c.addEventListener('abort', b);
    c.removeEventListener('abort', b);
    expect(c.aborted).toBe(false);
    expect(() => c.throwIfAborted()).not.toThrow();
    c.abort('gone');
    c.abort('again');
    expect(calls).toEqual(['a:gone']);
    expect(c.aborted).toBe(true);
    expect(() => c.throwIfAborted()).toThrow('gone');
  });

  it('never runs a listener added after the abort (as AbortSignal)', () => {
    const c = new Cancellation();
    c.abort(new Error('x'));
    let ran = false;
    c.addEventListener('abort', () => (ran = true));
    const s = new AbortController();
    s.abort(new Error('x'));
    let ranNative = false;
    s.signal.addEventListener('abort', () => (ranNative = true));
    expect([ran, ranNative]).toEqual([false, false]);
  });

  it('an AbortSignal is a CallSignal too', () => {
    const controller = new AbortController();
    const signal: CallSignal = controller.signal;
    controller.abort(new Error('stop'));
    expect(() => signal.throwIfAborted()).toThrow('stop');
  });
});
