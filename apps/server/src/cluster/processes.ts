import { availableParallelism } from 'node:os';

/**
 * SVC_PROCESSES / `--processes`: a positive integer, or `auto` for one process per core the OS gives us.
 * Throws an Error whose message says what is accepted.
 *
 * @example
 * parseProcesses('auto'); // os.availableParallelism()
 */
export function parseProcesses(text: string): number {
  const value = text.trim();
  if (value === 'auto') return availableParallelism();
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 1024) {
    throw new Error(`"${text}" is not a number of processes: use a whole number from 1 to 1024, or auto (one per core)`);
  }
  return Number(value);
}
