import { useEffect, useRef, useState, type FormEvent } from 'react';
import type { DashboardCreatedKey, DashboardKey, DashboardKeyList } from '@svc/protocol';
import { api, ApiError } from '../api.js';
import { hrefOf, link, useTitle } from '../router.js';
import { Time } from '../components/Time.js';
import { useLoad, useRefresh } from '../use-load.js';
import { IDLE_REFRESH_MS } from '../delivery-refresh.js';
import { ConfirmDialog, ErrorMessage, ShowOnce, Spinner } from '../components/Status.js';
import { LastDeliveryStatus } from '../components/LastDeliveryStatus.js';
import { FieldError } from '../components/FieldError.js';

export function KeysPage() {
  useTitle('API Keys');
  const [keys, reload] = useLoad(() => api<DashboardKeyList>('GET', '/keys').then((r) => r.data), []);
  // Last delivery changes on its own (deliveries are sent, retried): the list follows it without a click.
  useRefresh(reload, keys.state === 'ready' ? IDLE_REFRESH_MS : null, keys.data);
  const [creating, setCreating] = useState(false);
  // New keys on screen, newest first: creating another does not take away one not yet copied.
  const [created, setCreated] = useState<DashboardCreatedKey[]>([]);
  const [revoking, setRevoking] = useState<DashboardKey | null>(null);
  const [revokeState, setRevokeState] = useState<{ busy: boolean; error?: string }>({ busy: false });
  const [revoked, setRevoked] = useState<DashboardKey | null>(null);
  const revokedNotice = useRef<HTMLDivElement>(null);
  const createButton = useRef<HTMLButtonElement>(null);
  // The Revoke button that opened the dialog is gone with the revoked key's actions: focus goes to the outcome.
  useEffect(() => revokedNotice.current?.focus(), [revoked]);

  const revoke = async () => {
    if (!revoking) return;
    setRevokeState({ busy: true });
    try {
      await api('POST', `/keys/${encodeURIComponent(revoking.id)}/revoke`, {});
      // A revoked key is useless: its shown-once banner goes, so the whole key is not left on screen.
      setCreated((shown) => shown.filter((c) => c.key.id !== revoking.id));
      setRevoked(revoking);
      setRevoking(null);
      setRevokeState({ busy: false });
      await reload();
    } catch (err) {
      setRevokeState({ busy: false, error: (err as Error).message });
    }
  };

  return (
    <section>
      <div className="page-head">
        <div>
          <p className="eyebrow">Settings</p>
          <h1>API Keys</h1>
          <p className="muted">Keys authenticate calls to <code>/v1</code>. Each key has its own audit webhook, signing secret and rate limit.</p>
        </div>
        {!creating && (
          <button ref={createButton} type="button" className="button primary" onClick={() => { setCreating(true); setRevoked(null); }}>
            Create key
          </button>
        )}
      </div>

      {creating && (
        <CreateKeyForm
          onCancel={() => setCreating(false)}
          onCreated={(result) => {
            setCreating(false);
            setCreated((shown) => [result, ...shown]);
            void reload();
          }}
        />
      )}
      {created.map((c) => (
        <ShowOnce
          key={c.key.id}
          label={`New key “${c.key.name}”`}
          value={c.token}
          note="Copy it now: it is shown only once and cannot be retrieved later."
          onDone={() => setCreated((shown) => shown.filter((other) => other !== c))}
          returnFocus={createButton}
        />
      ))}

      {revoked && (
        <div ref={revokedNotice} className="alert ok" role="status" tabIndex={-1} data-testid="revoked-notice">
          <span>
            Revoked “{revoked.name}” (<code className="key-prefix">{revoked.prefix}</code>): requests with it are now refused.
          </span>
        </div>
      )}
      {keys.state === 'error' && <ErrorMessage message={keys.message} onRetry={reload} />}
      {keys.state === 'loading' && !keys.data && <Spinner label="Loading keys…" />}
      {keys.data && keys.data.length === 0 && <div className="card empty">No API keys yet. Create one to call the API.</div>}
      {keys.data && keys.data.length > 0 && (
        <div className="card table-card">
          <table className="table keys-table">
            <thead>
              <tr>
                <th>Name</th>
                <th>Key</th>
                <th>Created</th>
                <th>Last used</th>
                <th>Last delivery</th>
                <th>
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.data.map((key) => (
                <tr key={key.id} className={key.revoked_at ? 'revoked' : undefined} data-key-id={key.id}>
                  <td data-label="Name">
                    {key.revoked_at ? (
                      <span className="key-name">{key.name}</span>
                    ) : (
                      <a className="key-name" href={hrefOf({ page: 'key', keyId: key.id })} onClick={link({ page: 'key', keyId: key.id })}>
                        {key.name}
                      </a>
                    )}
                    {key.revoked_at && <span className="badge muted-badge">Revoked</span>}
                  </td>
                  <td data-label="Key">
                    <code className="key-prefix">{key.prefix}</code>
                  </td>
                  <td data-label="Created">
                    <Time iso={key.created_at} show="date" />
                  </td>
                  <td data-label="Last used">
                    <Time iso={key.last_used_at} show="relative" />
                  </td>
                  <td data-label="Last delivery">
                    {key.webhook_url || key.last_delivery ? <LastDeliveryStatus last={key.last_delivery} retrying={key.retrying} failingSince={key.failing_since} compact /> : <span className="muted">No webhook</span>}
                  </td>
                  <td className="row-actions">
                    {!key.revoked_at && (
                      <>
                        {/* Named after their key: a screen reader's list of links and buttons holds every row's. */}
                        <a className="button small" href={hrefOf({ page: 'key', keyId: key.id })} onClick={link({ page: 'key', keyId: key.id })}>
                          Settings<span className="visually-hidden">{` of ${keyName(key)}`}</span>
                        </a>
                        <a className="button small" href={hrefOf({ page: 'deliveries', keyId: key.id })} onClick={link({ page: 'deliveries', keyId: key.id })}>
                          Deliveries<span className="visually-hidden">{` of ${keyName(key)}`}</span>
                        </a>
                        <button type="button" className="button small danger-outline" onClick={() => { setRevoking(key); setRevokeState({ busy: false }); }}>
                          Revoke<span className="visually-hidden">{` ${keyName(key)}`}</span>
                        </button>
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      {revoking && (
        <ConfirmDialog
          title={`Revoke “${revoking.name}”?`}
          body={`Requests with ${revoking.prefix} will be refused with 401 at once. This cannot be undone.`}
          confirmLabel="Revoke key"
          busy={revokeState.busy}
          error={revokeState.error}
          onConfirm={revoke}
          onCancel={() => setRevoking(null)}
        />
      )}
    </section>
  );
}

/** A key as its row's buttons name it: `“production” (sk-svc-ab12…)`; names may repeat, prefixes do not. */
function keyName(key: DashboardKey): string {
  return `“${key.name}” (${key.prefix})`;
}

function CreateKeyForm({ onCreated, onCancel }: { onCreated: (r: DashboardCreatedKey) => void; onCancel: () => void }) {
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onCreated(await api<DashboardCreatedKey>('POST', '/keys', { name }));
    } catch (err) {
      setError(err instanceof ApiError || err instanceof Error ? err.message : String(err));
      setBusy(false);
    }
  };
  return (
    <form className="card inline-form" onSubmit={submit} noValidate>
      <label className="field grow">
        <span>Key name</span>
        <input
          name="name"
          value={name}
          onChange={(e) => setName(e.target.value)}
          placeholder="e.g. production"
          maxLength={64}
          autoFocus
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? 'key-name-error' : undefined}
        />
        <FieldError id="key-name-error" message={error} />
      </label>
      <div className="actions">
        <button type="button" className="button ghost" onClick={onCancel} disabled={busy}>
          Cancel
        </button>
        <button type="submit" className="button primary" disabled={busy}>
          {busy ? 'Creating…' : 'Create key'}
        </button>
      </div>
    </form>
  );
}
