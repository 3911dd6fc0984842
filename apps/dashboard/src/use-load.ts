import { useCallback, useEffect, useRef, useState } from 'react';

export type Loaded<T> =
  | { state: 'loading'; data?: T }
  | { state: 'error'; message: string; data?: T }
  | { state: 'ready'; data: T };

/** Runs `load` when `deps` change; `reload` runs it again, keeping the old data visible meanwhile. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): [Loaded<T>, () => Promise<void>, (data: T) => void] {
  const [value, setValue] = useState<Loaded<T>>({ state: 'loading' });
  const generation = useRef(0);
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const run = useCallback(load, deps);
  const reload = useCallback(async () => {
    const mine = ++generation.current;
    setValue((old) => ({ state: 'loading', data: old.data }));
    try {
      const data = await run();
      if (mine === generation.current) setValue({ state: 'ready', data });
    } catch (err) {
      if (mine === generation.current) setValue((old) => ({ state: 'error', message: (err as Error).message, data: old.data }));
    }
  }, [run]);
  useEffect(() => {
    void reload();
  }, [reload]);
  const set = useCallback((data: T) => setValue({ state: 'ready', data }), []);
  return [value, reload, set];
}
