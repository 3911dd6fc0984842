import { describe, expect, it } from 'vitest';
import { SAME_SIGNAL_MS, stopSignalReader } from '../../src/stop-signals.js';

/** A reader on a clock the test moves. */
function reader() {
  let time = 1_000;
  const read = stopSignalReader(() => time);
  return { read, later: (ms: number) => (time += ms) };
}

describe('stopSignalReader', () => {
  it('the first signal stops gracefully; the same again later stops now', () => {
    const { read, later } = reader();
    expect(read('SIGINT')).toBe('stop');
    later(SAME_SIGNAL_MS * 3);
    expect(read('SIGINT')).toBe('stop-now');
  });

  it('the same signal again at once (timeout(1) signals the process, then its group) is the same stop', () => {
    const { read, later } = reader();
    expect(read('SIGTERM')).toBe('stop');
    expect(read('SIGTERM')).toBe('ignore');
    later(SAME_SIGNAL_MS - 1);
    expect(read('SIGTERM')).toBe('ignore');
    later(1);
    expect(read('SIGTERM')).toBe('stop-now');
  });

  it('another signal at once insists; a second hangup never does', () => {
    const term = reader();
    expect(term.read('SIGTERM')).toBe('stop');
    expect(term.read('SIGINT')).toBe('stop-now');
    const hup = reader();
    expect(hup.read('SIGHUP')).toBe('stop');
    expect(hup.read('SIGHUP')).toBe('ignore');
    hup.later(60_000);
    expect(hup.read('SIGHUP')).toBe('ignore');
    expect(hup.read('SIGTERM')).toBe('stop-now');
  });
});
