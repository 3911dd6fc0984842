import { showControls } from '../format.js';

/**
 * The start of a receiver's answer under its heading, as text that shows what it holds (see `showControls`), and
 * says so when part of it was not text.
 */
export function ReceiverAnswer({ heading, body, label, testId }: { heading: string; body: string; label: string; testId: string }) {
  const shown = showControls(body);
  return (
    <div className="receiver-answer">
      <h3 className="subhead small">{heading}</h3>
      {shown.binary && (
        <p className="muted small-text" data-testid={`${testId}-binary`}>
          Part of this answer is not UTF-8 text (binary, or another encoding): those bytes show as �.
        </p>
      )}
      <pre className="payload" data-testid={testId} tabIndex={0} aria-label={label}>
        {shown.text}
      </pre>
    </div>
  );
}
