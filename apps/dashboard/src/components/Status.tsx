import { useState } from 'react';

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

/** A secret or key shown once, with a Copy button. */
export function ShowOnce({ label, value, note, onDone }: { label: string; value: string; note: string; onDone: () => void }) {
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
    <div className="show-once" role="region" aria-label={label}>
      <div className="show-once-head">
        <strong>{label}</strong>
        <span className="muted">{note}</span>
      </div>
      <div className="copy-row">
        <code className="secret" data-testid="shown-once-value">{value}</code>
        <button type="button" className="button" onClick={copy}>
          {copied === 'copied' ? 'Copied' : 'Copy'}
        </button>
      </div>
      {copied === 'failed' && <p className="field-error">Copying was blocked by the browser; select the text and copy it.</p>}
      <button type="button" className="button ghost small" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

export function ConfirmDialog(props: {
  title: string;
  body: string;
  confirmLabel: string;
  busy: boolean;
  error?: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  return (
    <div className="backdrop" onClick={props.onCancel}>
      <div className="dialog" role="dialog" aria-modal="true" aria-labelledby="dialog-title" onClick={(e) => e.stopPropagation()}>
        <h2 id="dialog-title">{props.title}</h2>
        <p>{props.body}</p>
        {props.error && <ErrorMessage message={props.error} />}
        <div className="actions end">
          <button type="button" className="button ghost" onClick={props.onCancel} disabled={props.busy}>
            Cancel
          </button>
          <button type="button" className="button danger" onClick={props.onConfirm} disabled={props.busy} autoFocus>
            {props.busy ? 'Working…' : props.confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}
