import { useCallback, useEffect, useRef, useState } from 'react';

export type Loaded<T> =
  | { state: 'loading'; data?: T }
  | { state: 'error'; message: string; data?: T }
  | { state: 'ready'; data: T };

/**
 * Runs `load` when `deps` change; `reload` runs it again, keeping the old data visible meanwhile; `set` replaces
 * the data, or derives it from the data as it is then (`set((old) => …)`).
 */
export function useLoad<T extends object | null>(
  load: () => Promise<T>,
  deps: unknown[],
): [Loaded<T>, () => Promise<void>, (data: T | ((old: T | undefined) => T)) => void] {
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
  const set = useCallback(
    (data: T | ((old: T | undefined) => T)) => setValue((old) => ({ state: 'ready', data: typeof data === 'function' ? data(old.data) : data })),
    [],
  );
  return [value, reload, set];
}

/**
 * Runs `reload` `ms` after the data last changed (`data`), while the tab is visible: a hidden tab loads again
 * only once it is shown. `ms` null: no refresh. For lists that change on their own (deliveries being sent).
 */
export function useRefresh(reload: () => Promise<void>, ms: number | null, data: unknown): void {
  useEffect(() => {
    if (ms === null) return;
    const onVisible = () => void reload();
    const timer = setTimeout(() => {
      if (document.visibilityState === 'visible') onVisible();
      else document.addEventListener('visibilitychange', onVisible, { once: true });
    }, ms);
    return () => {
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [data, ms, reload]);
}
