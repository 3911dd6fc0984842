import { api, type Usage, type UsagePoint } from '../api.js';
import { formatNumber } from '../format.js';
import { useLoad } from '../use-load.js';
import { ErrorMessage, Spinner } from '../components/Status.js';
import { BarChart } from '../components/BarChart.js';
import { navigate, useTitle } from '../router.js';

function sum(points: UsagePoint[], field: 'requests' | 'total_tokens' | 'input_tokens' | 'output_tokens'): number {
  return points.reduce((acc, p) => acc + p[field], 0);
}

export function UsagePage({ keyId = '' }: { keyId?: string }) {
  useTitle('Usage');
  const [usage, reload] = useLoad(() => api<Usage>('GET', '/usage?days=30'), []);
  // The chosen key lives in the URL (?key=…), so a view can be bookmarked and shared.
  const setKeyId = (id: string) => navigate(id ? { page: 'usage', keyId: id } : { page: 'usage' });

  if (usage.state === 'error' && !usage.data) return <ErrorMessage message={usage.message} onRetry={reload} />;
  if (!usage.data) return <Spinner label="Loading usage…" />;
  const data = usage.data;
  const selected = data.keys.find((k) => k.key_id === keyId);
  const series = selected ? selected.series : data.total;
  const scope = selected ? `key “${selected.name}”` : 'all keys';

  return (
    <section>
      <div className="page-head">
        <div>
          <h1>Usage</h1>
          <p className="muted">Requests and tokens per day (UTC) for the last 30 days.</p>
        </div>
        <div className="field inline">
          <label htmlFor="usage-key">Key</label>
          <select id="usage-key" name="key" value={keyId} onChange={(e) => setKeyId(e.target.value)}>
            <option value="">All keys (total)</option>
            {data.keys.map((k) => (
              <option key={k.key_id} value={k.key_id}>
                {k.name} ({k.prefix}){k.revoked ? ' — revoked' : ''}
              </option>
            ))}
          </select>
        </div>
      </div>
      <div className="stats">
        <div className="stat">
          <span className="stat-label">Requests</span>
          <span className="stat-value">{formatNumber(sum(series, 'requests'))}</span>
        </div>
        <div className="stat">
          <span className="stat-label">Input tokens</span>
          <span className="stat-value">{formatNumber(sum(series, 'input_tokens'))}</span>
        </div>
        <div className="stat">
          <span className="stat-label">Output tokens</span>
          <span className="stat-value">{formatNumber(sum(series, 'output_tokens'))}</span>
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
      <div className="card table-card">
        <table className="table">
          <thead>
            <tr>
              <th>Key</th>
              <th className="num">Requests</th>
              <th className="num">Input tokens</th>
              <th className="num">Output tokens</th>
              <th className="num">Total tokens</th>
            </tr>
          </thead>
          <tbody>
            {data.keys.map((k) => (
              <tr key={k.key_id}>
                <td data-label="Key">
                  {k.name} <code className="muted">{k.prefix}</code>
                </td>
                <td className="num" data-label="Requests">{formatNumber(sum(k.series, 'requests'))}</td>
                <td className="num" data-label="Input tokens">{formatNumber(sum(k.series, 'input_tokens'))}</td>
                <td className="num" data-label="Output tokens">{formatNumber(sum(k.series, 'output_tokens'))}</td>
                <td className="num" data-label="Total tokens">{formatNumber(sum(k.series, 'total_tokens'))}</td>
              </tr>
            ))}
            <tr className="total-row">
              <td data-label="Key">Total</td>
              <td className="num" data-label="Requests">{formatNumber(sum(data.total, 'requests'))}</td>
              <td className="num" data-label="Input tokens">{formatNumber(sum(data.total, 'input_tokens'))}</td>
              <td className="num" data-label="Output tokens">{formatNumber(sum(data.total, 'output_tokens'))}</td>
              <td className="num" data-label="Total tokens">{formatNumber(sum(data.total, 'total_tokens'))}</td>
            </tr>
          </tbody>
        </table>
      </div>
    </section>
  );
}
