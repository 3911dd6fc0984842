import { useCallback, useEffect, useId, useRef, useState, type FormEvent } from 'react';
import type { DashboardKey, DashboardKeyResult, DashboardMe, DashboardSigningSecret, DashboardTestResult, WebhookTestResult } from '@svc/protocol';
import { api, ApiError, getKey } from '../api.js';
import { addNavigationGuard, hrefOf, link, useTitle } from '../router.js';
import { formatDuration, formatTime } from '../format.js';
import { Time } from '../components/Time.js';
import { ReceiverAnswer } from '../components/ReceiverAnswer.js';
import { useLoad, useRefresh } from '../use-load.js';
import { IDLE_REFRESH_MS } from '../delivery-refresh.js';
import { ConfirmDialog, CopyButton, ErrorMessage, ShowOnce, Spinner } from '../components/Status.js';
import { LastDeliveryStatus } from '../components/LastDeliveryStatus.js';
import { TextField } from '../components/TextField.js';
import { LiveStatus } from '../components/LiveStatus.js';
import { KeyNotFound } from '../components/KeyNotFound.js';
import { forgetDraft, peekDraft, trackDraft, type WebhookDraft } from '../drafts.js';

type FieldErrors = Partial<Record<'webhook_url' | 'rate_limit_rpm' | 'signing_secret_overlap_seconds' | 'form', string>>;

/** A key's rotation overlap as the form shows it: hours, empty for the server's default. */
const overlapHours = (key: DashboardKey) => (key.signing_secret_overlap_seconds === null ? '' : String(key.signing_secret_overlap_seconds / 3600));
/** A key's rate limit as the form shows it, empty for the server's default. */
const rpmText = (key: DashboardKey) => (key.rate_limit_rpm === null ? '' : String(key.rate_limit_rpm));

export function KeySettingsPage({ keyId, me }: { keyId: string; me: DashboardMe }) {
  const [loaded, reload, setKey] = useLoad(() => getKey(keyId), [keyId]);
  useTitle(loaded.data ? `${loaded.data.name} · API Keys` : 'API Keys');
  // The key changes on its own and elsewhere: Last delivery as deliveries are sent and retried, and whatever
  // another tab or the CLI saves (a revoke, a new signing secret, a webhook URL). The page follows it; the form
  // keeps what is typed in it (see WebhookForm). A look that started before a change made here is dropped: it
  // would put back the key as it was before.
  const shown = loaded.data;
  const changesHere = useRef(0);
  const changed = useCallback(
    (key: DashboardKey) => {
      changesHere.current++;
      setKey(key);
    },
    [setKey],
  );
  const refreshDeliveryStatus = useCallback(async () => {
    const before = changesHere.current;
    const fresh = await getKey(keyId).catch(() => null);
    if (fresh && before === changesHere.current) setKey((old) => (old && old.id === fresh.id ? fresh : old ?? null));
  }, [keyId, setKey]);
  useRefresh(refreshDeliveryStatus, shown && !shown.revoked_at ? IDLE_REFRESH_MS : null, shown);

  if (loaded.state === 'error' && !loaded.data) return <ErrorMessage message={loaded.message} onRetry={reload} />;
  if (!loaded.data) return loaded.state === 'loading' ? <Spinner label="Loading key…" /> : <KeyNotFound />;
  const key = loaded.data;
  return (
    <section>
      <Breadcrumb name={key.name} />
      <div className="page-head">
        <div>
          <p className="eyebrow">Settings → API Keys</p>
          <h1>{key.name}</h1>
          <p className="muted">
            <code>{key.prefix}</code> · created <Time iso={key.created_at} show="date" /> · last used{' '}
            {key.last_used_at ? <Time iso={key.last_used_at} show="relative" /> : 'never'}
          </p>
        </div>
        <a className="button" href={hrefOf({ page: 'deliveries', keyId })} onClick={link({ page: 'deliveries', keyId })}>
          Deliveries
        </a>
      </div>
      {key.revoked_at ? (
        <div className="alert warn">This key was revoked on {formatTime(key.revoked_at)}; its settings can no longer be changed.</div>
      ) : (
        <div className="grid-2">
          <WebhookForm apiKey={key} me={me} onSaved={changed} />
          <div className="stack">
            <SigningSecret apiKey={key} me={me} onChanged={changed} />
            <div className="card">
              <h2>Last delivery</h2>
              <LastDeliveryStatus last={key.last_delivery} retrying={key.retrying} failingSince={key.failing_since} />
            </div>
            <ListenCommand webhookUrl={key.webhook_url} />
          </div>
        </div>
      )}
    </section>
  );
}

/**
 * The local loop: the `svc-cli listen` line that receives this key's deliveries on this machine, ready to copy.
 * With a loopback Webhook URL its port and path are the URL's; otherwise the default, and the URL to set.
 */
function ListenCommand({ webhookUrl }: { webhookUrl: string | null }) {
  const local = localListenTarget(webhookUrl);
  const target = local ?? { port: '4000', path: '/' };
  const command = ['svc-cli listen', `--port ${target.port}`, ...(target.path !== '/' ? [`--path ${target.path}`] : [])].join(' ');
  return (
    <div className="card" aria-label="Receive locally" role="region">
      <h2>Receive locally</h2>
      <p className="muted">
        {local ? (
          <>Deliveries go to this machine. Run this to receive and print them:</>
        ) : (
          <>
            Set the Webhook URL to <code>{`http://127.0.0.1:${target.port}/`}</code>, then run this to receive and print deliveries on this machine:
          </>
        )}
      </p>
      <div className="copy-row">
        <code className="secret" data-testid="listen-command">
          {command}
        </code>
        <CopyButton value={command} />
      </div>
      <p className="muted small-text">
        Add <code>--forward-to localhost:3000/your/path</code> to pass each delivery to your app (svc then gets your app's answer, and retries
        when it fails); set <code>SVC_WEBHOOK_SECRET</code> to the signing secret to check signatures; <code>svc-cli webhooks test --sample failed</code>{' '}
        sends a sample.
      </p>
    </div>
  );
}

/** Port and path of a loopback webhook URL (what `svc-cli listen` would bind), else null. */
export function localListenTarget(webhookUrl: string | null): { port: string; path: string } | null {
  if (!webhookUrl) return null;
  let url: URL;
  try {
    url = new URL(webhookUrl);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' || !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) return null;
  return { port: url.port || '80', path: url.pathname || '/' };
}

function Breadcrumb({ name }: { name: string }) {
  return (
    <nav className="breadcrumb" aria-label="Breadcrumb">
      <a href={hrefOf({ page: 'keys' })} onClick={link({ page: 'keys' })}>
        API Keys
      </a>
      <span aria-hidden="true">/</span>
      <span>{name}</span>
    </nav>
  );
}

function WebhookForm({ apiKey, me, onSaved }: { apiKey: DashboardKey; me: DashboardMe; onSaved: (key: DashboardKey) => void }) {
  // An edit made before the session ended under this form comes back (see drafts.ts).
  const [restored, setRestored] = useState(() => peekDraft(apiKey.id, me.user.id));
  const [url, setUrl] = useState(restored?.url ?? apiKey.webhook_url ?? '');
  const [rpm, setRpm] = useState(restored?.rpm ?? rpmText(apiKey));
  const [overlap, setOverlap] = useState(restored?.overlap ?? overlapHours(apiKey));
  // A field not edited here follows the key when it changes elsewhere (another tab, the CLI); an edited one keeps
  // what is typed.
  const previous = useRef(apiKey);
  useEffect(() => {
    const was = previous.current;
    previous.current = apiKey;
    if (was === apiKey) return;
    const wasUrl = was.webhook_url ?? '';
    setUrl((value) => (value === wasUrl ? apiKey.webhook_url ?? '' : value));
    setRpm((value) => (value === rpmText(was) ? rpmText(apiKey) : value));
    setOverlap((value) => (value === overlapHours(was) ? overlapHours(apiKey) : value));
  }, [apiKey]);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState<'save' | 'test' | null>(null);
  const [saved, setSaved] = useState(false);
  const [test, setTest] = useState<WebhookTestResult | null>(null);
  const dirty =
    url !== (apiKey.webhook_url ?? '') || rpm !== rpmText(apiKey) || overlap !== overlapHours(apiKey);

  // Why Send test is off, said beside it (a disabled button's tooltip is out of reach of keyboard and touch).
  const testBlocked = dirty ? 'Save your changes first: Send test uses the saved Webhook URL.' : !apiKey.webhook_url ? 'Set a Webhook URL and save it to send a test.' : null;
  const testBlockedId = useId();

  // "Saved" goes at the next edit (not when a Save puts in values saved elsewhere).
  const edited = (set: (value: string) => void) => (value: string) => {
    set(value);
    setSaved(false);
  };
  useUnsavedChangesWarning(dirty);
  const unsaved = useRef<WebhookDraft | null>(null);
  unsaved.current = dirty ? { url, rpm, overlap } : null;
  useEffect(() => {
    forgetDraft(apiKey.id);
    return trackDraft(apiKey.id, me.user.id, () => unsaved.current);
  }, [apiKey.id, me.user.id]);

  const fail = (err: unknown) => {
    setSaved(false);
    const param = err instanceof ApiError ? err.param : null;
    const message = (err as Error).message;
    setErrors(param === 'webhook_url' || param === 'rate_limit_rpm' || param === 'signing_secret_overlap_seconds' ? { [param]: message } : { form: message });
  };

  const save = async (event: FormEvent) => {
    event.preventDefault();
    if (busy !== null) return;
    setSaved(false);
    const urlProblem = webhookUrlProblem(url.trim());
    if (urlProblem) {
      setErrors({ webhook_url: urlProblem });
      return;
    }
    const rpmValue = rpm.trim() === '' ? null : Number(rpm);
    if (rpmValue !== null && (!Number.isInteger(rpmValue) || rpmValue < 1)) {
      setErrors({ rate_limit_rpm: 'Enter a whole number of requests per minute (1 or more), or leave it empty for the default.' });
      return;
    }
    const hours = overlap.trim() === '' ? null : Number(overlap);
    if (hours !== null && !(Number.isFinite(hours) && hours >= 0 && hours <= 720)) {
      setErrors({ signing_secret_overlap_seconds: 'Enter a number of hours from 0 to 720, or leave it empty for the default.' });
      return;
    }
    setBusy('save');
    setErrors({});
    try {
      // Only the fields changed here since the key was loaded: a Save in another tab (or the CLI) of a field left
      // alone here stays as it was saved, instead of being put back to what this page loaded (a webhook URL put
      // back would also send the key's pending deliveries to the old receiver).
      const changes: { webhook_url?: string | null; rate_limit_rpm?: number | null; signing_secret_overlap_seconds?: number | null } = {};
      const urlValue = url.trim() || null;
      if (urlValue !== apiKey.webhook_url) changes.webhook_url = urlValue;
      if (rpmValue !== apiKey.rate_limit_rpm) changes.rate_limit_rpm = rpmValue;
      const overlapValue = hours === null ? null : Math.round(hours * 3600);
      if (overlapValue !== apiKey.signing_secret_overlap_seconds) changes.signing_secret_overlap_seconds = overlapValue;
      const res = await api<DashboardKeyResult>('PATCH', `/keys/${encodeURIComponent(apiKey.id)}`, changes);
      onSaved(res.key);
      // The form now shows the key as saved, the fields changed elsewhere included (else they would read as unsaved edits).
      setUrl(res.key.webhook_url ?? '');
      setRpm(rpmText(res.key));
      setOverlap(overlapHours(res.key));
      setRestored(null);
      // A test's outcome is about the URL it went to: once another one is saved, it no longer says anything.
      if (res.key.webhook_url !== apiKey.webhook_url) setTest(null);
      setSaved(true);
    } catch (err) {
      fail(err);
    } finally {
      setBusy(null);
    }
  };

  const sendTest = async () => {
    if (busy !== null) return;
    setBusy('test');
    setSaved(false);
    setErrors({});
    setTest(null);
    try {
      const res = await api<DashboardTestResult>('POST', `/keys/${encodeURIComponent(apiKey.id)}/test`, {});
      setTest(res.result);
      onSaved(res.key);
    } catch (err) {
      fail(err);
    } finally {
      setBusy(null);
    }
  };

  return (
    <form className="card" onSubmit={save} noValidate aria-label="Webhook settings">
      <h2>Audit webhook</h2>
      <p className="muted">After every completed request, an <code>llm.request.completed</code> payload is POSTed to this URL.</p>
      <TextField
        label="Webhook URL"
        name="webhook_url"
        type="url"
        inputMode="url"
        placeholder="https://example.com/webhooks/svc"
        value={url}
        onChange={edited(setUrl)}
        error={errors.webhook_url}
      />
      <TextField
        label="Rate limit (requests/min)"
        name="rate_limit_rpm"
        inputMode="numeric"
        placeholder={`Default (${me.default_rate_limit_rpm})`}
        value={rpm}
        onChange={edited(setRpm)}
        error={errors.rate_limit_rpm}
      />
      <TextField
        label="Secret overlap after Rotate (hours)"
        name="signing_secret_overlap_seconds"
        inputMode="decimal"
        placeholder={`Default (${me.default_signing_secret_overlap_seconds / 3600})`}
        value={overlap}
        onChange={edited(setOverlap)}
        error={errors.signing_secret_overlap_seconds}
      />
      {restored && dirty && (
        <div className="alert warn" role="status" data-testid="draft-restored">
          Your unsaved changes from before the session ended are back in the form: Save to keep them.
        </div>
      )}
      {errors.form && <ErrorMessage message={errors.form} />}
      {/* aria-disabled while a Save or test runs: a disabled button would drop keyboard focus to the page's start. */}
      <div className="actions">
        <button type="submit" className="button primary" aria-disabled={busy !== null}>
          {busy === 'save' ? 'Saving…' : 'Save'}
        </button>
        <button
          type="button"
          className="button"
          onClick={sendTest}
          disabled={testBlocked !== null}
          aria-disabled={busy !== null}
          aria-describedby={testBlocked ? testBlockedId : undefined}
        >
          {busy === 'test' ? 'Sending…' : 'Send test'}
        </button>
        <LiveStatus className="saved" testId="save-status">
          {saved && !dirty ? 'Saved' : null}
        </LiveStatus>
      </div>
      {testBlocked && (
        <p id={testBlockedId} className="muted small-text test-blocked" data-testid="send-test-reason">
          {testBlocked}
        </p>
      )}
      <LiveStatus testId="test-status">
        {test && (
        <div className={`alert ${test.success ? 'ok' : 'error'}`} data-testid="test-result">
          {test.success ? (
            <span>
              Test delivered to <code>{test.delivered_to}</code>
            </span>
          ) : (
            <span>
              {testFailure(test)} (<code>{test.delivered_to}</code>)
            </span>
          )}
        </div>
        )}
      </LiveStatus>
      {test && !test.success && test.response_body?.trim() ? (
        // The receiver's own words are usually the only place that says why it refused.
        <ReceiverAnswer
          heading={`Receiver's answer${test.status_code != null ? ` (HTTP ${test.status_code}, first 2 KB)` : ' (first 2 KB)'}`}
          body={test.response_body}
          label="Receiver's answer to the test"
          testId="test-receiver-answer"
        />
      ) : null}
    </form>
  );
}

/** Catches the URL mistakes a newcomer makes before the server sees them; the server checks the rest. */
export function webhookUrlProblem(value: string): string | null {
  // Only what looks like a host without its scheme (`localhost:4000`, `example.com/hook`); other text is
  // left to the server's own message.
  const hostLike = /^(localhost|\[[0-9a-f:]+\]|[\w-]+(\.[\w-]+)+)(:\d+)?([/?#]\S*)?$/i.test(value);
  if (value !== '' && hostLike && !/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    const example = /^(localhost|127\.|\[::1\])/i.test(value) ? `http://${value}` : `https://${value}`;
    return `Add http:// or https:// at the start, e.g. ${example}`;
  }
  return null;
}

/** `Test failed with HTTP 403: Forbidden`, without repeating `HTTP 403` when that is all the error says. */
export function testFailure(test: WebhookTestResult): string {
  const status = test.status_code != null ? ` with HTTP ${test.status_code}` : '';
  const error = test.error?.trim();
  if (!error || (test.status_code != null && error === `HTTP ${test.status_code}`)) return `Test failed${status || ': no details'}`;
  return `Test failed${status}: ${error}`;
}

/** Asks before unsaved edits are lost: leaving within the app (confirm) or the page itself (beforeunload). */
function useUnsavedChangesWarning(dirty: boolean) {
  useEffect(() => {
    if (!dirty) return;
    const beforeUnload = (event: BeforeUnloadEvent) => {
      event.preventDefault();
      event.returnValue = '';
    };
    window.addEventListener('beforeunload', beforeUnload);
    const removeGuard = addNavigationGuard(() => !window.confirm('You have unsaved changes to the webhook settings. Leave without saving?'));
    return () => {
      window.removeEventListener('beforeunload', beforeUnload);
      removeGuard();
    };
  }, [dirty]);
}

function SigningSecret({ apiKey, me, onChanged }: { apiKey: DashboardKey; me: DashboardMe; onChanged: (key: DashboardKey) => void }) {
  const [shown, setShown] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [cleared, setCleared] = useState(false);
  const rotateButton = useRef<HTMLButtonElement>(null);
  const generateButton = useRef<HTMLButtonElement>(null);
  // Clear goes with the secret: focus goes to Generate, which takes its place, not to the page's start.
  useEffect(() => {
    if (cleared) generateButton.current?.focus();
  }, [cleared]);
  const has = apiKey.signing_secret_last4 !== null;
  const overlapSeconds = apiKey.signing_secret_overlap_seconds ?? me.default_signing_secret_overlap_seconds;

  const generate = async () => {
    setBusy(true);
    setError(null);
    try {
      const res = await api<DashboardSigningSecret>('POST', `/keys/${encodeURIComponent(apiKey.id)}/signing-secret`, {});
      setShown(res.secret);
      setCleared(false);
      setConfirming(false);
      onChanged(res.key);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const rotationNote =
    overlapSeconds > 0
      ? `The secret ending in …${apiKey.signing_secret_last4} keeps signing beside the new one for ${formatDuration(overlapSeconds)}, ` +
        `until ${formatTime(new Date(Date.now() + overlapSeconds * 1000).toISOString())}: put the new secret in your receiver before then.`
      : `The secret ending in …${apiKey.signing_secret_last4} stops working at once: receivers still using it will refuse deliveries.`;
  const clear = async () => {
    if (!window.confirm('Clear the signing secret? Webhooks will be sent without X-Svc-Signature and webhook-signature headers.')) return;
    setBusy(true);
    setError(null);
    try {
      const res = await api<DashboardKeyResult>('DELETE', `/keys/${encodeURIComponent(apiKey.id)}/signing-secret`);
      setShown(null);
      setCleared(true);
      onChanged(res.key);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="card" aria-label="Signing secret" role="group">
      <h2>Signing secret</h2>
      <p className="muted">
        When set, every webhook carries <code>webhook-signature: v1,…</code> (Standard Webhooks) and <code>X-Svc-Signature: sha256=…</code>, HMAC-SHA256
        signatures of the raw body.
      </p>
      <p className="secret-state" data-testid="signing-secret-state">
        {has ? (
          <>
            Set, ending in <code>…{apiKey.signing_secret_last4}</code>
          </>
        ) : (
          <span className="muted">Not set</span>
        )}
      </p>
      {apiKey.previous_signing_secret_expires_at && (
        <p className="muted" data-testid="previous-secret-state">
          The previous secret, ending in <code>…{apiKey.previous_signing_secret_last4}</code>, still signs until{' '}
          <time dateTime={apiKey.previous_signing_secret_expires_at}>{formatTime(apiKey.previous_signing_secret_expires_at)}</time>.
        </p>
      )}
      {shown && (
        <ShowOnce
          label="Signing secret"
          value={shown}
          note="Copy it into your receiver now: it is shown only once."
          onDone={() => setShown(null)}
          returnFocus={rotateButton}
        />
      )}
      {error && <ErrorMessage message={error} />}
      <div className="actions">
        {has ? (
          <>
            <button ref={rotateButton} type="button" className="button" onClick={() => setConfirming(true)} disabled={busy}>
              Rotate
            </button>
            <button type="button" className="button danger-outline" onClick={clear} disabled={busy}>
              Clear
            </button>
          </>
        ) : (
          <button ref={generateButton} type="button" className="button" onClick={generate} disabled={busy}>
            Generate
          </button>
        )}
      </div>
      <LiveStatus className="muted">{cleared && !has ? 'Signing secret cleared: webhooks are sent unsigned.' : null}</LiveStatus>
      {confirming && (
        <ConfirmDialog
          title="Rotate the signing secret?"
          body={`A new secret is generated and shown once. ${rotationNote}`}
          confirmLabel="Rotate secret"
          busy={busy}
          error={error ?? undefined}
          onConfirm={generate}
          onCancel={() => setConfirming(false)}
        />
      )}
    </div>
  );
}
