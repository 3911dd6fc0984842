import type { ReactNode } from 'react';

/**
 * A polite live region that is on the page before its message comes (Saved, Copied, Redelivery queued): screen
 * readers announce a change inside a region they already know of, and often say nothing of one added with its
 * text already in it. Empty, it takes no room.
 *
 * @example
 * <LiveStatus className="saved">{saved ? 'Saved' : null}</LiveStatus>
 */
export function LiveStatus({ children, className, testId }: { children: ReactNode; className?: string; testId?: string }) {
  return (
    <span role="status" className={`live-status${className ? ` ${className}` : ''}`} data-testid={testId}>
      {children}
    </span>
  );
}
