import { DEFAULT_GROUNDING_THRESHOLD, type FlaggedSpan, type GroundingResult } from './check.js';

export const JUDGE_REASON = 'judge: unsupported';

/**
 * Combines an LLM judge's verdict with an offline result. The judge returns verbatim phrases it
 * finds unsupported; only exact substrings of `answer` are kept (a judge may paraphrase or invent),
 * each at its first occurrence. When any phrase survives, the answer is not grounded: the score
 * drops below the threshold, further the more of the answer is flagged. Pure; returns a new result.
 *
 * @example
 * const offline = checkGrounding({ sources, answer });
 * const merged = mergeJudgeSpans(offline, answer, ['in 1845', 'not in the answer']);
 * merged.flaggedSpans.filter((s) => s.reason === 'judge: unsupported'); // only "in 1845"
 */
export function mergeJudgeSpans(
  result: GroundingResult,
  answer: string,
  spans: readonly string[],
  threshold: number = DEFAULT_GROUNDING_THRESHOLD,
): GroundingResult {
  if (!result.checked) return result;
  const added: FlaggedSpan[] = [];
  for (const phrase of spans) {
    if (typeof phrase !== 'string' || phrase.trim() === '') continue;
    const start = answer.indexOf(phrase);
    if (start < 0) continue;
    const end = start + phrase.length;
    // Spans never overlap: a phrase overlapping one the judge already gave is dropped.
    if (added.some((s) => s.start < end && start < s.end)) continue;
    added.push({ start, end, text: phrase, reason: JUDGE_REASON, score: 0 });
  }
  if (added.length === 0) return result;
  // The judge's phrase replaces the offline spans it overlaps.
  const kept = result.flaggedSpans.filter((s) => !added.some((a) => a.start < s.end && s.start < a.end));
  const flaggedSpans = [...kept, ...added].sort((a, b) => a.start - b.start);
  const fraction = coveredFraction(added, answer.length);
  // Below the threshold by construction, and lower the more of the answer the judge rejects.
  const score = Math.round(Math.min(result.score, threshold * (1 - fraction) * 0.99) * 1000) / 1000;
  return { ...result, checked: true, grounded: false, score, flaggedSpans };
}

function coveredFraction(spans: readonly FlaggedSpan[], length: number): number {
  if (length === 0) return 0;
  const sorted = [...spans].sort((a, b) => a.start - b.start);
  let covered = 0;
  let until = 0;
  for (const s of sorted) {
    const from = Math.max(s.start, until);
    if (s.end > from) covered += s.end - from;
    until = Math.max(until, s.end);
  }
  return covered / length;
}
