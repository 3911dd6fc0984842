import { useCallback, useEffect, useMemo, useRef, useState, type FormEvent } from 'react';
import { GroundingClaims } from '../components/GroundingClaims.js';
import { KeyNotFound } from '../components/KeyNotFound.js';
import type { BulkRedeliverResult, DashboardDelivery, DashboardDeliveryDetail, DashboardDeliveryPage, DashboardDeliveryProgress, DeliveryStatus } from '@svc/protocol';
import { DELIVERY_ID_PATTERN, deliveryListSearch } from '@svc/protocol/delivery-list-query';
import { api, getKey } from '../api.js';
import { DELIVERY_FILTER_PARAMS, hrefOf, link, navigate, useTitle, type DeliveryFilter, type Route } from '../router.js';
import { formatNumber, formatTime, fromLocalInput, showControls, timeZoneName, toLocalInput } from '../format.js';
import { ReceiverAnswer } from '../components/ReceiverAnswer.js';
import { Time } from '../components/Time.js';
import { useLoad, useRefresh } from '../use-load.js';
import { detailRefreshMs, nextRefreshMs } from '../delivery-refresh.js';
import { attemptNote } from '../attempt-note.js';
import { ConfirmDialog, CopyButton, DeliveryStateBadge, ErrorMessage, OutcomeBadge, Spinner } from '../components/Status.js';
import { FieldError } from '../components/FieldError.js';
import { LiveStatus } from '../components/LiveStatus.js';

interface Page {
  rows: DashboardDelivery[];
  hasMore: boolean;
}

const STATUS_OPTIONS: Array<{ value: '' | DeliveryStatus; label: string }> = [
  { value: '', label: 'All statuses' },
  { value: 'delivered', label: 'Delivered' },
  { value: 'pending', label: 'Pending (retrying)' },
  { value: 'failed', label: 'Failed' },
  { value: 'cancelled', label: 'Cancelled' },
];

function listPath(keyId: string, status: '' | DeliveryStatus, filter: DeliveryFilter, before?: string): string {
  return `/keys/${encodeURIComponent(keyId)}/deliveries${deliveryListSearch({ limit: 20, status: status || undefined, ...filter, before })}`;
}

type DeliveriesRoute = Extract<Route, { page: 'deliveries' }>;

/** The search part of a deliveries route (request, time range, HTTP code), without the empty ones. */
function filterOf(route: DeliveryFilter): DeliveryFilter {
  const filter: DeliveryFilter = {};
  for (const name of DELIVERY_FILTER_PARAMS) if (route[name]) filter[name] = route[name];
  return filter;
}

export function DeliveriesPage({ route }: { route: DeliveriesRoute }) {
  const { keyId } = route;
  const status: '' | DeliveryStatus = route.status ?? '';
  const open = route.delivery ?? null;
  const filter = filterOf(route);
  const filterKey = JSON.stringify(filter);
  const filtered = status !== '' || Object.keys(filter).length > 0;
  // The filter and the open delivery are kept in the URL (replaced, not pushed: Back leaves the page), so a
  // filtered view can be reloaded, linked and shared.
  const go = (next: { status?: '' | DeliveryStatus; filter?: DeliveryFilter; delivery?: string | null }) => {
    const nextStatus = next.status ?? status;
    const nextDelivery = next.delivery === undefined ? open : next.delivery;
    navigate(
      { page: 'deliveries', keyId, ...(nextStatus ? { status: nextStatus } : {}), ...(next.filter ?? filter), ...(nextDelivery ? { delivery: nextDelivery } : {}) },
      { replace: true, keepScroll: true },
    );
  };
  const setStatus = (next: '' | DeliveryStatus) => go({ status: next, delivery: null });
  const setOpen = (id: string | null) => go({ delivery: id });
  const [key] = useLoad(() => getKey(keyId), [keyId]);
  const [page, reload, setPage] = useLoad<Page>(
    () => api<DashboardDeliveryPage>('GET', listPath(keyId, status, filter)).then((r) => ({ rows: r.data, hasMore: r.has_more })),
    [keyId, status, filterKey],
  );
  const [moreError, setMoreError] = useState<string | null>(null);
  const [pagesLoaded, setPagesLoaded] = useState(1);
  useEffect(() => setPagesLoaded(1), [keyId, status, filterKey]);

  // Pending rows change on their own (the worker sends them) and new ones arrive, so the first page follows
  // them without a click (while the tab is visible).
  const refreshIn = page.state === 'ready' && pagesLoaded === 1 ? nextRefreshMs(page.data.rows, Date.now()) : null;
  useRefresh(reload, refreshIn, page.data);
  // Older pages loaded, the list holds still so rows do not move under the reader; Refresh (or a bulk
  // redelivery) shows the first page again, and from then on it follows new deliveries again.
  const refresh = () => {
    setPagesLoaded(1);
    return reload();
  };

  // Said on the button while it loads (a slow server otherwise shows nothing, and a second click asks again).
  const [loadingMore, setLoadingMore] = useState(false);
  const loadMore = async () => {
    const current = page.data;
    const last = current?.rows.at(-1);
    if (!current || !last || loadingMore) return;
    setMoreError(null);
    setLoadingMore(true);
    try {
      const next = await api<DashboardDeliveryPage>('GET', listPath(keyId, status, filter, last.id));
      setPage({ rows: [...current.rows, ...next.data], hasMore: next.has_more });
      setPagesLoaded((n) => n + 1);
    } catch (err) {
      setMoreError((err as Error).message);
    } finally {
      setLoadingMore(false);
    }
  };

  const name = key.data?.name ?? '…';
  useTitle(key.data ? `Deliveries of ${key.data.name}` : 'Deliveries');
  // No such key of this account: said as on its settings page, not as a list that failed to load (with Try again).
  if (key.state === 'ready' && key.data === null) return <KeyNotFound />;
  return (
    <section>
      <nav className="breadcrumb" aria-label="Breadcrumb">
        <a href={hrefOf({ page: 'keys' })} onClick={link({ page: 'keys' })}>
          API Keys
        </a>
        <span aria-hidden="true">/</span>
        <a href={hrefOf({ page: 'key', keyId })} onClick={link({ page: 'key', keyId })}>
          {name}
        </a>
        <span aria-hidden="true">/</span>
        <span>Deliveries</span>
      </nav>
      <div className="page-head">
        <div>
          <p className="eyebrow">Settings → API Keys</p>
          <h1>Deliveries</h1>
          <p className="muted">Webhook deliveries of “{name}”, newest first. Each keeps the exact payload that was signed and sent.</p>
        </div>
        <div className="actions">
          <div className="field inline">
            <label htmlFor="delivery-status">Status</label>
            <select id="delivery-status" name="status" value={status} onChange={(e) => setStatus(e.target.value as '' | DeliveryStatus)}>
              {STATUS_OPTIONS.map((o) => (
                <option key={o.value} value={o.value}>
                  {o.label}
                </option>
              ))}
            </select>
          </div>
          <button type="button" className="button" onClick={() => void refresh()}>
            Refresh
          </button>
          <BulkRedeliver keyId={keyId} status={status} filter={filter} onDone={() => void refresh()} />
        </div>
      </div>
      <DeliverySearch
        // Its fields keep what was typed (a delivery id searched included); the URL fills them on load.
        key={keyId}
        filter={filter}
        onSearch={(next, delivery) => go({ filter: next, delivery })}
        onClear={() => go({ status: '', filter: {}, delivery: null })}
        filtered={filtered}
      />

      {page.state === 'error' && <ErrorMessage message={page.message} onRetry={() => void refresh()} />}
      {open && page.data && !page.data.rows.some((r) => r.id === open) && (
        // A linked delivery that is not on the loaded page: its details on their own.
        <div className="card">
          <DeliveryDetails keyId={keyId} id={open} onRedelivered={() => undefined} />
        </div>
      )}
      {page.state === 'loading' && !page.data && <Spinner label="Loading deliveries…" />}
      {page.data && page.data.rows.length === 0 && (
        <div className="card empty">
          {Object.keys(filter).length > 0
            ? 'No deliveries match this search.'
            : status
              ? 'No deliveries with this status.'
              : 'No deliveries yet. Send a test from the key settings or make a request.'}
        </div>
      )}
      {page.data && page.data.rows.length > 0 && (
        <div className="card table-card">
          <table className="table deliveries-table">
            <thead>
              <tr>
                <th>Time</th>
                <th>Request</th>
                <th>Request status</th>
                <th>Status</th>
                <th>Code</th>
                <th>Attempts</th>
                <th>
                  <span className="visually-hidden">Details</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {page.data.rows.map((d) => (
                <DeliveryRow
                  key={d.id}
                  keyId={keyId}
                  delivery={d}
                  open={open === d.id}
                  onToggle={() => setOpen(open === d.id ? null : d.id)}
                  onRedelivered={(row) => setPage({ ...page.data!, rows: page.data!.rows.map((r) => (r.id === row.id ? { ...r, ...pick(row) } : r)) })}
                />
              ))}
            </tbody>
          </table>
          {page.data.hasMore && (
            <div className="table-foot">
              <button type="button" className="button" onClick={() => void loadMore()} disabled={loadingMore}>
                {loadingMore ? 'Loading older deliveries…' : 'Load older deliveries'}
              </button>
              {moreError && <ErrorMessage message={moreError} />}
            </div>
          )}
        </div>
      )}
    </section>
  );
}

/**
 * Which delivery a row's or a detail's buttons act on, for their accessible names ("Redeliver the delivery of
 * chatcmpl-…, Nov 30, …"): a list of twenty "Details" or "Redeliver" buttons says nothing of which is which.
 */
function deliveryName(d: Pick<DashboardDelivery, 'request_id' | 'created_at'>): string {
  return `the delivery of ${d.request_id}, ${formatTime(d.created_at)}`;
}

/** The list fields of a delivery (details carry more). */
function pick(row: DashboardDelivery): DashboardDelivery {
  const { id, event, request_id, test, url, status, attempts, last_status_code, last_error, next_attempt_at, created_at, delivered_at, request_status_code } = row;
  return { id, event, request_id, test, url, status, attempts, last_status_code, last_error, next_attempt_at, created_at, delivered_at, request_status_code };
}

function DeliveryRow(props: { keyId: string; delivery: DashboardDelivery; open: boolean; onToggle: () => void; onRedelivered: (row: DashboardDelivery) => void }) {
  const d = props.delivery;
  return (
    <>
      <tr className={`clickable${props.open ? ' open' : ''}`} onClick={props.onToggle} data-delivery-id={d.id}>
        <td data-label="Time">
          <Time iso={d.created_at} show="full" />
        </td>
        <td data-label="Request">
          <code className="truncate">{d.request_id}</code>
          {d.test && <span className="badge muted-badge">test</span>}
        </td>
        <td data-label="Request status">
          <RequestStatus code={d.request_status_code} test={d.test} />
        </td>
        <td data-label="Status">
          <DeliveryStateBadge delivery={d} />
        </td>
        <td data-label="Code">{d.last_status_code ?? '—'}</td>
        <td data-label="Attempts">{d.attempts}</td>
        <td className="row-actions">
          <button type="button" className="button small ghost" aria-expanded={props.open}>
            {props.open ? 'Hide' : 'Details'}
            <span className="visually-hidden">{`${props.open ? ' ' : ' of '}${deliveryName(d)}`}</span>
          </button>
        </td>
      </tr>
      {props.open && (
        <tr className="detail-row">
          <td colSpan={7}>
            <DeliveryDetails keyId={props.keyId} id={d.id} onRedelivered={props.onRedelivered} />
          </td>
        </tr>
      )}
    </>
  );
}

/** What the detail view's buttons ask of the API, what they then say, and when the details are read again. */
const ACTIONS = {
  // The attempt runs in the background; show its result once it has had a moment.
  redeliver: { done: 'Redelivery queued: a new attempt is being made now.', reloadAfterMs: 1500 },
  cancel: { done: 'Cancelled: no further attempts will be made.', reloadAfterMs: 0 },
} as const;

function DeliveryDetails({ keyId, id, onRedelivered }: { keyId: string; id: string; onRedelivered: (row: DashboardDelivery) => void }) {
  const path = `/keys/${encodeURIComponent(keyId)}/deliveries/${encodeURIComponent(id)}`;
  const [detail, reload, setDetail] = useLoad(() => api<DashboardDeliveryDetail>('GET', path), [path]);
  const [redeliver, setRedeliver] = useState<{ busy: boolean; message?: string; error?: string }>({ busy: false });
  const fresh = detail.state === 'ready' ? detail.data : undefined;
  // The payload never changes (every attempt sends the same bytes) and may be megabytes: it is read once, and
  // what changes (status, attempts) is read again without it.
  const follow = useCallback(async () => {
    try {
      const progress = await api<DashboardDeliveryProgress>('GET', `${path}/progress`);
      setDetail((old) => ({ ...old!, ...progress }));
    } catch {
      // Kept as shown, and asked again at the next refresh (a new object restarts its timer).
      setDetail((old) => ({ ...old! }));
    }
  }, [path, setDetail]);
  // A pending delivery's details follow it (an attempt under way, a redelivery to a slow receiver) until it is
  // finished: the one look 1.5 s after Redeliver left them at Pending while the list beside them said Delivered.
  useRefresh(follow, fresh ? detailRefreshMs(fresh, Date.now()) : null, detail.data);
  // Keep the list row in step with what the details show (status, attempts, code).
  useEffect(() => {
    if (fresh) onRedelivered(fresh);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [fresh]);

  const act = async (action: keyof typeof ACTIONS) => {
    if (redeliver.busy) return;
    setRedeliver({ busy: true });
    try {
      onRedelivered(await api<DashboardDelivery>('POST', `${path}/${action}`, {}));
      setRedeliver({ busy: false, message: ACTIONS[action].done });
      setTimeout(() => void follow(), ACTIONS[action].reloadAfterMs);
    } catch (err) {
      setRedeliver({ busy: false, error: (err as Error).message });
    }
  };

  if (detail.state === 'error' && !detail.data) return <ErrorMessage message={detail.message} onRetry={reload} />;
  if (!detail.data) return <Spinner label="Loading delivery…" />;
  const d = detail.data;
  return (
    <div className="delivery-detail">
      <div className="detail-head">
        <dl className="facts">
          <div>
            <dt>Delivery id</dt>
            <dd>
              <code className="id">{d.id}</code>
            </dd>
          </div>
          <div>
            <dt>URL</dt>
            <dd>
              <code>{d.url}</code>
            </dd>
          </div>
          <div>
            <dt>Status</dt>
            <dd>
              <DeliveryStateBadge delivery={d} />
            </dd>
          </div>
          <div>
            <dt>Request status</dt>
            <dd>
              <RequestStatus code={d.request_status_code} test={d.test} />
            </dd>
          </div>
          {d.next_attempt_at && (
            <div>
              <dt>Next attempt</dt>
              <dd>
                <Time iso={d.next_attempt_at} show="full" />
              </dd>
            </div>
          )}
          <div>
            <dt>Link</dt>
            <dd>
              <a href={hrefOf({ page: 'deliveries', keyId, delivery: d.id })} data-testid="delivery-link">
                Link to this delivery
              </a>
            </dd>
          </div>
        </dl>
        {/* aria-disabled, not disabled, while busy: a disabled button drops keyboard focus to the page's start. */}
        <div className="actions">
          <button type="button" className="button primary" onClick={() => void act('redeliver')} aria-disabled={redeliver.busy}>
            {redeliver.busy ? 'Redelivering…' : 'Redeliver'}
            <span className="visually-hidden">{` ${deliveryName(d)}`}</span>
          </button>
          {d.status === 'pending' && (
            <button type="button" className="button ghost" onClick={() => void act('cancel')} aria-disabled={redeliver.busy}>
              Cancel delivery<span className="visually-hidden">{` of ${d.request_id}, ${formatTime(d.created_at)}`}</span>
            </button>
          )}
          <button type="button" className="button ghost" onClick={() => void follow()}>
            Refresh<span className="visually-hidden">{` ${deliveryName(d)}`}</span>
          </button>
        </div>
      </div>
      <LiveStatus testId="delivery-action-status">{redeliver.message && <span className="alert ok">{redeliver.message}</span>}</LiveStatus>
      {redeliver.error && <ErrorMessage message={redeliver.error} />}
      <h2 className="subhead">Attempts</h2>
      {d.attempt_log.length === 0 ? (
        <p className="muted">No attempt yet.</p>
      ) : (
        <table className="table attempts-table">
          <thead>
            <tr>
              <th>#</th>
              <th>Time</th>
              <th>Outcome</th>
              <th>Code</th>
              <th>Duration</th>
              <th>Error / response</th>
            </tr>
          </thead>
          <tbody>
            {d.attempt_log.map((a) => (
              <tr key={a.attempt}>
                <td data-label="#">{a.attempt}</td>
                <td data-label="Time">
                  <Time iso={a.attempted_at} show="full" />
                </td>
                <td data-label="Outcome">
                  <OutcomeBadge outcome={a.outcome} />
                </td>
                <td data-label="Code">{a.status_code ?? '—'}</td>
                <td data-label="Duration">{a.duration_ms} ms</td>
                <td className="wrap" data-label="Error / response">
                  <AttemptNote attempt={a} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <SentHeaders attempts={d.attempt_log} />
      {d.attempt_log.filter(answeredFailure).map((a) => (
        <ReceiverAnswer
          key={`answer-${a.attempt}`}
          heading={`Receiver's answer to attempt ${a.attempt} (HTTP ${a.status_code ?? '—'}, first 2 KB)`}
          body={a.response_body ?? ''}
          label={`Receiver's answer to attempt ${a.attempt}`}
          testId="receiver-answer"
        />
      ))}
      <GroundingClaims payload={d.payload} />
      <Payload payload={d.payload} />
    </div>
  );
}

/** How much of a payload the page shows before Show all: a prompt of megabytes took the tab 10 s and more to lay out. */
const PAYLOAD_PREVIEW_CHARS = 64 * 1024;

/**
 * A delivery's payload, indented, and its raw bytes. A large one (a long prompt) shows its first 64 KB as sent until
 * Show all; Copy payload always takes all of it.
 */
function Payload({ payload }: { payload: string }) {
  const [whole, setWhole] = useState(false);
  const [rawOpen, setRawOpen] = useState(false);
  const cut = payload.length > PAYLOAD_PREVIEW_CHARS && !whole;
  const pretty = useMemo(() => (cut ? null : prettyJson(payload)), [payload, cut]);
  const size = useMemo(() => new TextEncoder().encode(payload).length, [payload]);
  const preview = cut ? `${payload.slice(0, PAYLOAD_PREVIEW_CHARS)}…` : payload;
  return (
    <>
      <div className="subhead-row">
        <h2 className="subhead">Payload</h2>
        <CopyButton value={payload} label="Copy payload" />
      </div>
      {cut && (
        <div className="alert warn" data-testid="payload-cut">
          <span>
            This payload is {formatNumber(size)} bytes: its first {formatNumber(PAYLOAD_PREVIEW_CHARS / 1024)} KB are shown, as sent. Copy payload takes all
            of it.
          </span>
          <button type="button" className="button small" onClick={() => setWhole(true)}>
            Show all
          </button>
        </div>
      )}
      <pre className="payload" data-testid="payload-pretty" tabIndex={0} aria-label="Payload">
        {pretty ?? preview}
      </pre>
      <details className="raw-payload" onToggle={(e) => setRawOpen(e.currentTarget.open)}>
        <summary>Raw bytes, exactly as signed and sent</summary>
        {/* A large payload's raw copy is laid out only when asked for. */}
        {(rawOpen || payload.length <= PAYLOAD_PREVIEW_CHARS) && (
          <pre className="payload" data-testid="payload" tabIndex={0} aria-label="Raw payload">
            {preview}
          </pre>
        )}
      </details>
    </>
  );
}

/** The status svc answered the original request with: green for 2xx, red otherwise. */
/** The status the client got; a test payload's is its sample's (no request was made), so it is not coloured. */
function RequestStatus({ code, test }: { code: number | null; test: boolean }) {
  if (code === null) return <span className="muted">—</span>;
  if (test) {
    return (
      <span className="muted" title="A test payload's sample value: no request was made.">
        {code} (sample)
      </span>
    );
  }
  return <span className={`badge ${code >= 200 && code < 300 ? 'ok' : 'bad'}`}>{code}</span>;
}

function AttemptNote({ attempt }: { attempt: DashboardDeliveryDetail['attempt_log'][number] }) {
  const note = attemptNote(attempt);
  if (!note) return <>—</>;
  return note.kind === 'error' ? <>{note.text}</> : <code className="truncate">{showControls(note.text).text}</code>;
}

function answeredFailure(a: DashboardDeliveryDetail['attempt_log'][number]): boolean {
  return a.outcome === 'failure' && typeof a.response_body === 'string' && a.response_body !== '';
}

function prettyJson(payload: string): string {
  try {
    return JSON.stringify(JSON.parse(payload), null, 2);
  } catch {
    return payload;
  }
}

const STATUS_WORDS: Record<'' | DeliveryStatus, string> = { '': '', delivered: 'delivered ', pending: 'pending ', failed: 'failed ', cancelled: 'cancelled ' };

/**
 * The list's search in words, for the bulk redelivery's question and outcome: ` of request chatcmpl-…, whose last
 * attempt got HTTP 500, created from … to …`; empty without a search.
 */
function searchWords(search: DeliveryFilter): string {
  const words: string[] = [];
  if (search.request_id) words.push(`of request ${search.request_id}`);
  if (search.last_status_code) words.push(`whose last attempt got HTTP ${search.last_status_code}`);
  if (search.since && search.until) words.push(`created from ${formatTime(search.since)} to ${formatTime(search.until)}`);
  else if (search.since) words.push(`created from ${formatTime(search.since)}`);
  else if (search.until) words.push(`created before ${formatTime(search.until)}`);
  return words.length > 0 ? ` ${words.join(', ')}` : '';
}

/**
 * Redeliver every delivery the list shows, by its status and its search (failed ones that got HTTP 500, say, once
 * the receiver is fixed): counts them first and asks, saying how many and which, then one call makes them all due now.
 */
function BulkRedeliver({ keyId, status, filter: search, onDone }: { keyId: string; status: '' | DeliveryStatus; filter: DeliveryFilter; onDone: () => void }) {
  const path = `/keys/${encodeURIComponent(keyId)}/deliveries/redeliver`;
  // The list's own terms, under the API's names: what is sent again is exactly what the list shows.
  const filter = { ...(status ? { status } : {}), ...search };
  const which = searchWords(search);
  const [state, setState] = useState<{ step: 'idle' | 'counting' | 'confirm' | 'sending'; count?: BulkRedeliverResult; message?: string; error?: string }>({ step: 'idle' });
  const noun = (n: number) => `${n} ${STATUS_WORDS[status]}${n === 1 ? 'delivery' : 'deliveries'}`;
  const button = useRef<HTMLButtonElement>(null);
  // A message is about the search it was said for: another search clears it.
  const searchKey = JSON.stringify(filter);
  useEffect(() => setState({ step: 'idle' }), [searchKey]);

  const start = async () => {
    if (state.step !== 'idle') return;
    setState({ step: 'counting' });
    try {
      const count = await api<BulkRedeliverResult>('POST', path, { ...filter, dry_run: true });
      if (count.matched === 0) setState({ step: 'idle', message: `No ${STATUS_WORDS[status]}deliveries${which} to redeliver.` });
      else setState({ step: 'confirm', count });
    } catch (err) {
      setState({ step: 'idle', error: (err as Error).message });
    }
  };
  const confirm = async () => {
    setState((s) => ({ ...s, step: 'sending', error: undefined }));
    try {
      const done = await api<BulkRedeliverResult>('POST', path, filter);
      setState({ step: 'idle', message: `Redelivery of ${noun(done.redelivered)}${which} queued.` });
      onDone();
    } catch (err) {
      setState((s) => ({ ...s, step: 'confirm', error: (err as Error).message }));
    }
  };

  const count = state.count?.matched ?? 0;
  const capped = state.count && count >= state.count.limit ? ` At most ${state.count.limit} are sent per click: the newest.` : '';
  return (
    <>
      {/* aria-disabled while it counts: a disabled button would drop keyboard focus to the page's start. */}
      <button ref={button} type="button" className="button" onClick={() => void start()} aria-disabled={state.step !== 'idle'}>
        {state.step === 'counting' ? 'Counting…' : `Redeliver all ${STATUS_WORDS[status]}…`.replace(' …', '…')}
        {which && state.step !== 'counting' && <span className="visually-hidden">{` (the deliveries${which})`}</span>}
      </button>
      <LiveStatus className="muted" testId="bulk-redeliver-status">
        {state.message}
      </LiveStatus>
      {state.step === 'idle' && state.error && <ErrorMessage message={state.error} />}
      {(state.step === 'confirm' || state.step === 'sending') && (
        <ConfirmDialog
          title={`Redeliver ${noun(count)}${which}?`}
          body={`Each is sent again now to the key's webhook URL, with the same bytes and delivery id (receivers de-duplicate on X-Svc-Delivery).${capped}`}
          confirmLabel={`Redeliver ${noun(count)}`}
          busy={state.step === 'sending'}
          error={state.error}
          onConfirm={() => void confirm()}
          onCancel={() => setState({ step: 'idle' })}
          returnFocus={button}
        />
      )}
    </>
  );
}

/** The headers of the latest attempt that kept them, as svc sent them. */
function SentHeaders({ attempts }: { attempts: DashboardDeliveryDetail['attempt_log'] }) {
  const last = attempts.filter((a) => a.request_headers !== null).at(-1);
  if (!last?.request_headers) return null;
  return (
    <>
      <h3 className="subhead small">Headers sent with attempt {last.attempt}</h3>
      <pre className="payload" data-testid="sent-headers" tabIndex={0} aria-label={`Headers sent with attempt ${last.attempt}`}>
        {Object.entries(last.request_headers)
          .map(([name, value]) => `${name}: ${value}`)
          .join('\n')}
      </pre>
    </>
  );
}

/**
 * The search form: a delivery id (the receiver's `webhook-id` / `X-Svc-Delivery`) opens that delivery; any other
 * id is a request id (`x-request-id`: `chatcmpl-…`, `req_…`, `test-…`); the last attempt's HTTP code (`500`, `5xx`) and a
 * creation time range, in the user's time zone, narrow the list. Applied on Search (or Enter), into the URL.
 */
function DeliverySearch(props: {
  filter: DeliveryFilter;
  filtered: boolean;
  onSearch: (filter: DeliveryFilter, delivery: string | null) => void;
  onClear: () => void;
}) {
  // A delivery opened from the list is no search: the field holds only what was typed (or the request searched).
  const [id, setId] = useState(props.filter.request_id ?? '');
  const [code, setCode] = useState(props.filter.last_status_code ?? '');
  const [since, setSince] = useState(toLocalInput(props.filter.since));
  const [until, setUntil] = useState(toLocalInput(props.filter.until));
  const [errors, setErrors] = useState<Partial<Record<'id' | 'code' | 'time', string>>>({});
  const zone = timeZoneName();
  const idField = useRef<HTMLInputElement>(null);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const text = id.trim();
    const codeText = code.trim().toLowerCase();
    const sinceIso = since ? fromLocalInput(since) : undefined;
    const untilIso = until ? fromLocalInput(until) : undefined;
    const problems: typeof errors = {};
    if (/^whd_/i.test(text) && !DELIVERY_ID_PATTERN.test(text)) problems.id = 'A delivery id is whd_ and 32 hexadecimal digits, as in the webhook-id header.';
    if (codeText && !/^[1-5](\d\d|xx)$/.test(codeText)) problems.code = 'Enter an HTTP status such as 500, or a class such as 5xx.';
    if (sinceIso && untilIso && sinceIso >= untilIso) problems.time = '“From” must be before “To”.';
    setErrors(problems);
    if (Object.keys(problems).length > 0) return;
    const isDelivery = DELIVERY_ID_PATTERN.test(text);
    props.onSearch(
      {
        ...(text && !isDelivery ? { request_id: text } : {}),
        ...(sinceIso ? { since: sinceIso } : {}),
        ...(untilIso ? { until: untilIso } : {}),
        ...(codeText ? { last_status_code: codeText } : {}),
      },
      isDelivery ? text : null,
    );
  };

  const field = (name: 'id' | 'code' | 'time') => (errors[name] ? { 'aria-invalid': true, 'aria-describedby': `delivery-search-${name}-error` } : {});
  return (
    <form role="search" aria-label="Search deliveries" className="card delivery-search" onSubmit={submit} noValidate>
      <div className="field grow">
        <label htmlFor="delivery-search-id">Delivery or request id</label>
        <input
          ref={idField}
          id="delivery-search-id"
          name="id"
          value={id}
          onChange={(e) => setId(e.target.value)}
          placeholder="whd_…, chatcmpl-… or test-…"
          spellCheck={false}
          autoComplete="off"
          {...field('id')}
        />
        <FieldError id="delivery-search-id-error" message={errors.id} />
      </div>
      <div className="field">
        <label htmlFor="delivery-search-code">HTTP code</label>
        <input id="delivery-search-code" name="last_status_code" value={code} onChange={(e) => setCode(e.target.value)} placeholder="500 or 5xx" inputMode="text" size={8} {...field('code')} />
        <FieldError id="delivery-search-code-error" message={errors.code} />
      </div>
      <div className="field">
        <label htmlFor="delivery-search-since">From ({zone})</label>
        <input id="delivery-search-since" name="since" type="datetime-local" value={since} onChange={(e) => setSince(e.target.value)} {...field('time')} />
      </div>
      <div className="field">
        <label htmlFor="delivery-search-until">To ({zone})</label>
        <input id="delivery-search-until" name="until" type="datetime-local" value={until} onChange={(e) => setUntil(e.target.value)} {...field('time')} />
      </div>
      <div className="actions">
        <button type="submit" className="button primary">
          Search
        </button>
        {(props.filtered || id !== '' || code !== '' || since !== '' || until !== '') && (
          <button
            type="button"
            className="button ghost"
            onClick={() => {
              setId('');
              setCode('');
              setSince('');
              setUntil('');
              setErrors({});
              props.onClear();
              // Clear filters goes with what it cleared: focus would be left on nothing, at the page's start.
              idField.current?.focus();
            }}
          >
            Clear filters
          </button>
        )}
      </div>
      <FieldError id="delivery-search-time-error" message={errors.time} />
    </form>
  );
}
