import type { LastDelivery } from '@svc/protocol';
import { formatTime } from '../format.js';
import { OutcomeBadge } from './Status.js';

/** The key's last delivery: time, outcome, status code, error. */
export function LastDeliveryStatus({ last, compact = false }: { last: LastDelivery | null; compact?: boolean }) {
  if (!last) return <span className="muted">No deliveries yet</span>;
  return (
    <span className={`last-delivery${compact ? ' compact' : ''}`} data-testid="last-delivery">
      <OutcomeBadge outcome={last.outcome} />
      {last.status_code !== null && <span className="code">HTTP {last.status_code}</span>}
      <time dateTime={last.at} className="muted">
        {formatTime(last.at)}
      </time>
      {last.error && <span className="error-text">{last.error}</span>}
    </span>
  );
}
