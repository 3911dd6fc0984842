import type { UsageReport } from '@svc/protocol';

type UsageKey = UsageReport['keys'][number];

export interface UsageKeyOptions {
  active: UsageKey[];
  /** Revoked keys with requests in the window (and the chosen one, whatever its use). */
  revoked: UsageKey[];
  /** Revoked keys left out: no request in the window, nothing to show. */
  hiddenRevoked: number;
}

/**
 * The Usage page's key picker: active keys first, then the revoked keys that have something to show. A user
 * who rotates keys often has hundreds of revoked ones; each unused one would be a line leading to an empty chart.
 *
 * @example
 * const { active, revoked, hiddenRevoked } = usageKeyOptions(report.keys, selectedId);
 */
export function usageKeyOptions(keys: UsageKey[], selectedId: string): UsageKeyOptions {
  const active: UsageKey[] = [];
  const revoked: UsageKey[] = [];
  let hiddenRevoked = 0;
  for (const key of keys) {
    if (!key.revoked) active.push(key);
    else if (key.summary.requests > 0 || key.key_id === selectedId) revoked.push(key);
    else hiddenRevoked += 1;
  }
  return { active, revoked, hiddenRevoked };
}
