import { useMemo } from 'react';
import type { Claim as PayloadClaim } from '@svc/protocol';

/** The grounding fields of a payload, read defensively: the bytes are the receiver's, not a typed value. */
function readGrounding(payload: string): { grounded: boolean; claims: PayloadClaim[] } | undefined {
  try {
    const p = JSON.parse(payload) as { grounding_checked?: unknown; grounded?: unknown; claims?: unknown };
    if (p.grounding_checked !== true || !Array.isArray(p.claims)) return undefined;
    return { grounded: p.grounded === true, claims: p.claims as PayloadClaim[] };
  } catch {
    return undefined;
  }
}

/**
 * The grounding check's verdict on each claim of the answer, with the passage of the request that supports it
 * best: what a reviewer needs to see why an answer was (or was not) flagged.
 */
export function GroundingClaims({ payload }: { payload: string }) {
  // Parsed once per payload, not at every render of the details (a payload may be megabytes).
  const g = useMemo(() => readGrounding(payload), [payload]);
  if (!g) return null;
  return (
    <section aria-labelledby="grounding-heading">
      <h3 id="grounding-heading">Grounding</h3>
      {g.claims.length === 0 ? (
        <p className="muted">The answer makes no checkable claim.</p>
      ) : (
        <table className="table claims-table" data-testid="claims">
          <thead>
            <tr>
              <th>Claim</th>
              <th>Support</th>
              <th>Evidence</th>
            </tr>
          </thead>
          <tbody>
            {g.claims.map((c) => (
              <tr key={`${c.start}-${c.end}`}>
                <td className="wrap">{c.text}</td>
                <td>
                  <span className={`badge ${c.grounded ? 'ok' : 'bad'}`}>{c.grounded ? 'Supported' : 'Unsupported'}</span> {c.score.toFixed(2)}
                </td>
                <td className="wrap">
                  {c.evidence ? (
                    <>
                      <span className="muted small-text">
                        message {c.evidence.message_index}, characters {c.evidence.start}–{c.evidence.end}:
                      </span>{' '}
                      <q>{c.evidence.text}</q>
                    </>
                  ) : (
                    <span className="muted">No source passage shares a word with it.</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
