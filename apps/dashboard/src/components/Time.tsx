import { formatDate, formatRelative, formatTime } from '../format.js';

const SHOW = { relative: formatRelative, date: formatDate, full: formatTime } as const;

/**
 * A time as the page shows it (`relative`: "3 min ago", `date`: "Nov 30, 2026", `full`: with seconds and zone),
 * in the viewer's time zone, with the whole time on hover and to assistive technology: in that zone and in UTC,
 * which receivers' and servers' logs use (Svix and Stripe show the exact time on hover alike).
 *
 * @example
 * <Time iso={key.last_used_at} show="relative" />
 */
export function Time({ iso, show }: { iso: string | null | undefined; show: keyof typeof SHOW }) {
  const text = SHOW[show](iso);
  if (!iso) return <>{text}</>;
  return (
    <time dateTime={iso} title={absoluteTime(iso)}>
      {text}
    </time>
  );
}

/** "Nov 30, 2026, 3:15:02 AM GMT+1 (2026-11-30T02:15:02.123Z)". */
export function absoluteTime(iso: string): string {
  const utc = new Date(iso).toISOString();
  return `${formatTime(iso)} (${utc})`;
}
