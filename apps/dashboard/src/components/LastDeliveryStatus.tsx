import type { DashboardKey, LastDelivery } from '@svc/protocol';
import { FAILING_ENDPOINT_MS } from '@svc/protocol/delivery-list-query';
import { formatClock, formatElapsed, formatTime } from '../format.js';
import { OutcomeBadge } from './Status.js';

/**
 * The key's last delivery: time, outcome, status code, error. A failed last attempt whose delivery will be
 * tried again says Retrying (how many deliveries, when the next attempt is), not Failed. A test send is marked
 * as one, and says nothing of the real deliveries: those still retrying say so beside it.
 */
export function LastDeliveryStatus({
  last,
  retrying = null,
  failingSince = null,
  compact = false,
}: {
  last: LastDelivery | null;
  retrying?: DashboardKey['retrying'];
  failingSince?: string | null;
  compact?: boolean;
}) {
  if (!last) return <span className="muted">No deliveries yet</span>;
  const failingFor = failingSince === null ? 0 : Date.now() - Date.parse(failingSince);
  // A real delivery's failed attempt that will be tried again: Retrying says both.
  const retryingShown = last.outcome === 'failure' && !last.test;
  return (
    <span className={`last-delivery${compact ? ' compact' : ''}`} data-testid="last-delivery">
      {!(retryingShown && retrying) && <OutcomeBadge outcome={last.outcome} />}
      {last.test && (
        <span className="badge" title="The last attempt was a test send, not a delivery of a request.">
          Test send
        </span>
      )}
      {retrying && <RetryingBadge retrying={retrying} />}
      {failingFor >= FAILING_ENDPOINT_MS && (
        <span className="badge bad" data-testid="failing-endpoint" title={`Every attempt since ${formatTime(failingSince)} has failed. Nothing was discarded.`}>
          {`Failing for ${formatElapsed(failingFor)}`}
        </span>
      )}
      {last.status_code !== null && <span className="code">HTTP {last.status_code}</span>}
      <time dateTime={last.at} className="muted">
        {formatTime(last.at)}
      </time>
      {last.error && last.error !== `HTTP ${last.status_code}` && <span className="error-text">{last.error}</span>}
    </span>
  );
}

function RetryingBadge({ retrying }: { retrying: NonNullable<DashboardKey['retrying']> }) {
  const count = `${retrying.deliveries} ${retrying.deliveries === 1 ? 'delivery' : 'deliveries'}`;
  return (
    <span className="badge wait" data-testid="retrying">
      {`Retrying (${count}${retrying.next_attempt_at ? `, next ${formatClock(retrying.next_attempt_at)}` : ''})`}
    </span>
  );
}
