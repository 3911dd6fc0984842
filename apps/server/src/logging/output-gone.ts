/**
 * Whether a failed write to stdout or stderr means nobody reads it any more: the pipe's reader went away
 * (EPIPE: `svc-server start | head -1`, a supervisor's log pipe gone) or the terminal hung up (EIO: the window
 * that ran the server closed, an ssh session dropped). The output is then dropped; a serving process keeps
 * serving, or finishes its graceful stop.
 *
 * @example
 * process.stderr.on('error', (err) => { if (!outputGone(err)) throw err; });
 */
export function outputGone(err: NodeJS.ErrnoException): boolean {
  return err.code === 'EPIPE' || err.code === 'EIO';
}
