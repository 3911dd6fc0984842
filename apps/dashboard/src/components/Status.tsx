import { useEffect, useRef, useState, type RefObject } from 'react';
import { formatClock } from '../format.js';
import { addNavigationGuard } from '../router.js';
import { trackShownOnce } from '../shown-once.js';
import { LiveStatus } from './LiveStatus.js';

export function Spinner({ label }: { label: string }) {
  return (
    <div className="spinner" role="status">
      <span className="spinner-dot" aria-hidden="true" />
      {label}
    </div>
  );
}

export function ErrorMessage({ message, onRetry }: { message: string; onRetry?: () => void }) {
  return (
    <div className="alert error" role="alert">
      <span>{message}</span>
      {onRetry && (
        <button type="button" className="button small" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** The outcome of a webhook attempt as a coloured label. */
export function OutcomeBadge({ outcome }: { outcome: string }) {
  const tone = outcome === 'success' || outcome === 'delivered' ? 'ok' : outcome === 'pending' ? 'wait' : 'bad';
  const text = outcome === 'success' ? 'Succeeded' : outcome === 'failure' ? 'Failed' : outcome[0]?.toUpperCase() + outcome.slice(1);
  return <span className={`badge ${tone}`}>{text}</span>;
}

/**
 * A delivery's state as a coloured label. A pending delivery that has failed before is not "Pending" but
 * "Retrying (attempt 3, next 12:05 UTC)": it failed, and it will be tried again.
 */
export function DeliveryStateBadge({ delivery }: { delivery: { status: string; attempts: number; next_attempt_at: string | null } }) {
  if (delivery.status === 'pending' && delivery.attempts > 0) {
    const next = delivery.next_attempt_at ? `, next ${formatClock(delivery.next_attempt_at)}` : '';
    return <span className="badge wait">{`Retrying (attempt ${delivery.attempts + 1}${next})`}</span>;
  }
  return <OutcomeBadge outcome={delivery.status} />;
}

/** A Copy button for `value`; says Copied, or that the browser refused. */
export function CopyButton({ value, label = 'Copy' }: { value: string; label?: string }) {
  const [copied, setCopied] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('copied');
    } catch {
      setCopied('failed');
    }
  };
  return (
    <>
      <button type="button" className="button small" onClick={copy} title={copied === 'failed' ? 'Copying was blocked by the browser; select the text and copy it.' : undefined}>
        {copied === 'copied' ? 'Copied' : copied === 'failed' ? 'Copy blocked' : label}
      </button>
      {/* The button's new text is not announced by every screen reader: the outcome is said here too. */}
      <LiveStatus className="visually-hidden">
        {copied === 'copied' ? 'Copied to the clipboard.' : copied === 'failed' ? 'Copying was blocked by the browser; select the text and copy it.' : null}
      </LiveStatus>
    </>
  );
}

/**
 * A secret or key shown once, with a Copy button. It appears after the button that asked for it (Create key,
 * Generate) has gone, so focus moves to Copy: keyboard and screen-reader users land on the new value; Done
 * gives it to `returnFocus`.
 *
 * Until it is copied (Copy, or the user's own copy of the selected text) it cannot go unnoticed: Done asks first,
 * leaving the page within the app (or Sign out) asks, reloading or closing the tab asks (beforeunload), and a
 * session that ends under it keeps it for after signing in again (shown-once.ts), as Stripe asks before a new
 * secret key's dialog closes.
 */
export function ShowOnce({
  label,
  value,
  note,
  onDone,
  returnFocus,
}: {
  label: string;
  value: string;
  note: string;
  onDone: () => void;
  /** Where focus goes on Done (the value and its buttons go away: focus would be left on nothing). */
  returnFocus?: RefObject<HTMLElement | null>;
}) {
  const [copied, setCopied] = useState<'idle' | 'copied' | 'failed'>('idle');
  // Copied by hand (selected, then Ctrl+C or the context menu) counts too: the browser may block Copy.
  const [copiedByHand, setCopiedByHand] = useState(false);
  const [closing, setClosing] = useState(false);
  const copyButton = useRef<HTMLButtonElement>(null);
  const secured = copied === 'copied' || copiedByHand;
  useEffect(() => copyButton.current?.focus(), [value]);
  useEffect(() => {
    setCopied('idle');
    setCopiedByHand(false);
    setClosing(false);
  }, [value]);
  useEffect(() => {
    if (secured) return;
    const onCopy = () => {
      if (window.getSelection()?.toString().includes(value)) setCopiedByHand(true);
    };
    const beforeUnload = (event: BeforeUnloadEvent) => {
      event.preventDefault();
      event.returnValue = '';
    };
    document.addEventListener('copy', onCopy);
    window.addEventListener('beforeunload', beforeUnload);
    const removeGuard = addNavigationGuard(() => !window.confirm(`${label} is shown only once and you have not copied it. Leave without copying it?`));
    const untrack = trackShownOnce(() => ({ label, value, note }));
    return () => {
      document.removeEventListener('copy', onCopy);
      window.removeEventListener('beforeunload', beforeUnload);
      removeGuard();
      untrack();
    };
  }, [secured, label, value, note]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('copied');
      setClosing(false);
    } catch {
      setCopied('failed');
    }
  };
  const done = () => {
    onDone();
    returnFocus?.current?.focus();
  };
  return (
    <div className="show-once" role="region" aria-label={label}>
      <div className="show-once-head">
        <strong>{label}</strong>
        <span className="muted">{note}</span>
      </div>
      <div className="copy-row">
        <code className="secret token" data-testid="shown-once-value">{value}</code>
        <button ref={copyButton} type="button" className="button" onClick={copy}>
          {copied === 'copied' ? 'Copied' : 'Copy'}
        </button>
        <LiveStatus className="visually-hidden">{copied === 'copied' ? `${label} copied to the clipboard.` : null}</LiveStatus>
      </div>
      {copied === 'failed' && <p className="field-error">Copying was blocked by the browser; select the text and copy it.</p>}
      {closing && !secured ? (
        <div className="alert warn" role="alert" data-testid="shown-once-uncopied">
          <span>You have not copied it. Once closed it cannot be shown again.</span>
          <button type="button" className="button small danger-outline" onClick={done}>
            Close without copying
          </button>
        </div>
      ) : (
        <button
          type="button"
          className="button ghost small"
          onClick={() => {
            if (secured) done();
            else {
              setClosing(true);
              copyButton.current?.focus();
            }
          }}
        >
          Done
        </button>
      )}
    </div>
  );
}

/**
 * A modal confirmation. It opens on Cancel (the safe choice, so Enter never destroys anything by
 * accident), keeps Tab inside itself, closes on Escape and gives focus back to what opened it — to
 * `returnFocus` when given: a button that was disabled while it worked (counting, say) had lost focus by then.
 */
export function ConfirmDialog(props: {
  title: string;
  body: string;
  confirmLabel: string;
  busy: boolean;
  error?: string;
  onConfirm: () => void;
  onCancel: () => void;
  returnFocus?: RefObject<HTMLElement | null>;
}) {
  const dialog = useRef<HTMLDivElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  const { onCancel, busy, returnFocus } = props;

  useEffect(() => {
    const opener = document.activeElement instanceof HTMLElement && document.activeElement !== document.body ? document.activeElement : null;
    cancel.current?.focus();
    return () => (returnFocus?.current ?? opener)?.focus();
  }, [returnFocus]);

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.key === 'Escape' && !busy) {
        event.preventDefault();
        onCancel();
        return;
      }
      if (event.key !== 'Tab' || !dialog.current) return;
      const focusable = [...dialog.current.querySelectorAll<HTMLElement>('button:not(:disabled), a[href], input:not(:disabled), select, textarea, [tabindex]:not([tabindex="-1"])')];
      const first = focusable[0];
      const last = focusable.at(-1);
      if (!first || !last) return;
      const inside = dialog.current.contains(document.activeElement);
      if (event.shiftKey && (document.activeElement === first || !inside)) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && (document.activeElement === last || !inside)) {
        event.preventDefault();
        first.focus();
      }
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [onCancel, busy]);

  return (
    // A click beside it cancels, as Escape does: not while the action runs (its outcome, an error say, shows in here).
    <div className="backdrop" onClick={() => !busy && onCancel()}>
      <div ref={dialog} className="dialog" role="dialog" aria-modal="true" aria-labelledby="dialog-title" aria-describedby="dialog-body" onClick={(e) => e.stopPropagation()}>
        <h2 id="dialog-title">{props.title}</h2>
        <p id="dialog-body">{props.body}</p>
        {props.error && <ErrorMessage message={props.error} />}
        <div className="actions end">
          <button ref={cancel} type="button" className="button" onClick={props.onCancel} disabled={props.busy}>
            Cancel
          </button>
          <button type="button" className="button danger" onClick={props.onConfirm} disabled={props.busy}>
            {props.busy ? 'Working…' : props.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}
