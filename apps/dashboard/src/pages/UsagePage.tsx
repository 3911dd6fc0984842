import type { UsagePoint, UsageReport } from '@svc/protocol';
import { api } from '../api.js';
import { formatNumber } from '../format.js';
import { useLoad } from '../use-load.js';
import { ErrorMessage, Spinner } from '../components/Status.js';
import { BarChart } from '../components/BarChart.js';
import { navigate, useTitle } from '../router.js';
import { usageKeyOptions } from '../usage-key-options.js';

/** `≤ 250 ms`: latency is counted in buckets, so a percentile is the bound of its bucket. */
function latency(ms: number | null): string {
  if (ms === null) return '—';
  if (ms > 30_000) return '> 30 s';
  return ms >= 1000 ? `≤ ${ms / 1000} s` : `≤ ${ms} ms`;
}

function share(p: UsagePoint): string {
  return p.ungrounded_share === null ? '—' : `${Math.round(p.ungrounded_share * 100)} % of ${formatNumber(p.grounding_checked)}`;
}

function errors(p: UsagePoint): string {
  return `${formatNumber(p.errors_4xx)} / ${formatNumber(p.errors_5xx)}`;
}

/** The columns every usage table shows, after its first one. */
function Cells({ p }: { p: UsagePoint }) {
  return (
    <>
      <td className="num" data-label="Requests">{formatNumber(p.requests)}</td>
      <td className="num" data-label="Errors 4xx / 5xx">{errors(p)}</td>
      <td className="num" data-label="Latency p50">{latency(p.latency_p50_ms)}</td>
      <td className="num" data-label="Latency p95">{latency(p.latency_p95_ms)}</td>
      <td className="num" data-label="Tokens">{formatNumber(p.total_tokens)}</td>
      <td className="num" data-label="Ungrounded">{share(p)}</td>
    </>
  );
}

function HeadCells() {
  return (
    <>
      <th className="num">Requests</th>
      <th className="num">Errors 4xx / 5xx</th>
      <th className="num">Latency p50</th>
      <th className="num">Latency p95</th>
      <th className="num">Tokens</th>
      <th className="num">Ungrounded</th>
    </>
  );
}

export function UsagePage({ keyId = '' }: { keyId?: string }) {
  useTitle('Usage');
  const [usage, reload] = useLoad(() => api<UsageReport>('GET', '/usage?days=30'), []);
  // The chosen key lives in the URL (?key=…), so a view can be bookmarked and shared.
  const setKeyId = (id: string) => navigate(id ? { page: 'usage', keyId: id } : { page: 'usage' });

  if (usage.state === 'error' && !usage.data) return <ErrorMessage message={usage.message} onRetry={reload} />;
  if (!usage.data) return <Spinner label="Loading usage…" />;
  const data = usage.data;
  const selected = data.keys.find((k) => k.key_id === keyId);
  const series = selected ? selected.series : data.total;
  const summary = selected ? selected.summary : data.total_summary;
  const scope = selected ? `key “${selected.name}”` : 'all keys';
  const activeDays = series.filter((p) => p.requests > 0).reverse();
  const options = usageKeyOptions(data.keys, keyId);
  const option = (k: (typeof data.keys)[number]) => (
    <option key={k.key_id} value={k.key_id}>
      {k.name} ({k.prefix})
    </option>
  );

  return (
    <section>
      <div className="page-head">
        <div>
          <h1>Usage</h1>
          <p className="muted">
            Requests, errors, latency, tokens and ungrounded answers per day (UTC) for the last 30 days. Latency is counted in buckets, so
            p50 and p95 are upper bounds.
          </p>
        </div>
        <div className="key-picker">
          <div className="field inline">
            <label htmlFor="usage-key">Key</label>
            <select
              id="usage-key"
              name="key"
              value={selected ? keyId : ''}
              onChange={(e) => setKeyId(e.target.value)}
              aria-describedby={options.hiddenRevoked > 0 ? 'usage-key-hidden' : undefined}
            >
              <option value="">All keys (total)</option>
              {options.active.length > 0 && <optgroup label="Active keys">{options.active.map(option)}</optgroup>}
              {options.revoked.length > 0 && <optgroup label="Revoked keys">{options.revoked.map(option)}</optgroup>}
            </select>
          </div>
          {options.hiddenRevoked > 0 && (
            <p className="hint" id="usage-key-hidden" data-testid="usage-key-hidden">
              {formatNumber(options.hiddenRevoked)} revoked {options.hiddenRevoked === 1 ? 'key' : 'keys'} without requests in these 30 days not listed
              (the total counts every key).
            </p>
          )}
        </div>
      </div>
      <div className="stats" data-testid="usage-summary">
        <div className="stat">
          <span className="stat-label">Requests</span>
          <span className="stat-value">{formatNumber(summary.requests)}</span>
        </div>
        <div className="stat">
          <span className="stat-label">Errors 4xx / 5xx</span>
          <span className="stat-value">{errors(summary)}</span>
        </div>
        <div className="stat">
          <span className="stat-label">Latency p50 / p95</span>
          <span className="stat-value">
            {latency(summary.latency_p50_ms)} / {latency(summary.latency_p95_ms)}
          </span>
        </div>
        <div className="stat">
          <span className="stat-label">Tokens (input + output)</span>
          <span className="stat-value">{formatNumber(summary.total_tokens)}</span>
        </div>
        <div className="stat">
          <span className="stat-label">Checked answers judged ungrounded</span>
          <span className="stat-value">{share(summary)}</span>
        </div>
      </div>
      <div className="grid-2">
        <div className="card">
          <h2>Requests per day</h2>
          <BarChart label={`Requests per day, ${scope}`} points={series.map((p) => ({ day: p.day, value: p.requests }))} unit="requests" tone="primary" />
        </div>
        <div className="card">
          <h2>Tokens per day</h2>
          <BarChart label={`Tokens per day, ${scope}`} points={series.map((p) => ({ day: p.day, value: p.total_tokens }))} unit="tokens" tone="secondary" />
        </div>
      </div>
      <h2 className="section-title">Per day, {scope}</h2>
      {activeDays.length === 0 ? (
        <div className="card empty">No requests in the last 30 days.</div>
      ) : (
        <div className="card table-card">
          <table className="table usage-days-table">
            <thead>
              <tr>
                <th>Day</th>
                <HeadCells />
              </tr>
            </thead>
            <tbody>
              {activeDays.map((p) => (
                <tr key={p.day}>
                  <td data-label="Day">{p.day}</td>
                  <Cells p={p} />
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h2 className="section-title">Per key, last 30 days</h2>
      <div className="card table-card">
        <table className="table usage-keys-table">
          <thead>
            <tr>
              <th>Key</th>
              <HeadCells />
            </tr>
          </thead>
          <tbody>
            {data.keys.map((k) => (
              <tr key={k.key_id}>
                <td data-label="Key" className="wrap">
                  {k.name} <code className="muted key-prefix">{k.prefix}</code>
                </td>
                <Cells p={k.summary} />
              </tr>
            ))}
            <tr className="total-row">
              <td data-label="Key">Total</td>
              <Cells p={data.total_summary} />
            </tr>
          </tbody>
        </table>
      </div>
    </section>
  );
}
