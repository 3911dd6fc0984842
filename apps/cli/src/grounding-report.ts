import type { SvcResult } from '@svc/protocol';
import { kleur, mark, streamColors } from './output.js';

/**
 * The `svc` grounding result for people: a verdict line, then the answer with flagged spans
 * highlighted and one line per span.
 *
 * @example
 * io.err(groundingReport(completion.svc, answer));
 */
export function groundingReport(svc: SvcResult, answer: string): string {
  if (!svc.dehallucinate_requested) return `${kleur.dim('Grounding: not requested (--no-dehallucinate)')}\n`;
  if (!svc.checked) return `${kleur.dim('Grounding: not checked (no answer text or no sources to check against)')}\n`;
  const score = svc.score.toFixed(2);
  const spans = [...svc.flagged_spans].sort((a, b) => a.start - b.start);
  const verdict = svc.grounded
    ? `${mark.ok()} ${kleur.green('grounded')}, score ${score}`
    : `${mark.bad()} ${kleur.red('not grounded')}, score ${score}`;
  const lines = [`Grounding: ${verdict}${spans.length > 0 ? `, ${spans.length} flagged ${spans.length === 1 ? 'span' : 'spans'}` : ''}`];
  if (spans.length > 0) {
    lines.push('', highlight(answer, spans), '');
    spans.forEach((span, i) => lines.push(`  ${i + 1}. ${kleur.red(`"${span.text}"`)} ${kleur.dim(`— ${span.reason} (score ${span.score.toFixed(2)})`)}`));
  }
  const claims = svc.claims ?? [];
  if (claims.length > 0) {
    lines.push('', `Claims (${claims.length}), each with the passage that best supports it:`);
    for (const c of claims) {
      const verdict = c.grounded ? mark.ok() : mark.bad();
      lines.push(`  ${verdict} ${clip(c.text, 100)} ${kleur.dim(`(score ${c.score.toFixed(2)})`)}`);
      lines.push(
        c.evidence
          ? kleur.dim(`      evidence: message ${c.evidence.message_index} [${c.evidence.start}-${c.evidence.end}] "${clip(c.evidence.text, 100)}" (${c.evidence.score.toFixed(2)} of it found)`)
          : kleur.dim('      evidence: none (no source sentence shares a word with it)'),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

/** One line of at most `max` characters. */
function clip(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`;
}

/** Marks each span: red and underlined with colours, between » « without. */
function highlight(answer: string, spans: SvcResult['flagged_spans']): string {
  let out = '';
  let at = 0;
  for (const span of spans) {
    if (span.start < at || span.end > answer.length || span.end <= span.start) continue;
    out += answer.slice(at, span.start);
    const text = answer.slice(span.start, span.end);
    // The report goes to stderr: marked as that stream is coloured.
    out += kleur.enabled && streamColors().err ? kleur.red().underline(text) : `»${text}«`;
    at = span.end;
  }
  return out + answer.slice(at);
}
