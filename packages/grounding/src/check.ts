import { analyze, type FlaggedSpan } from './analyze.js';
import { DEFAULT_MODEL, predict, type Model } from './model.js';
import type { SourceIndexCache } from './source-index.js';

/** Scores at or above this are `grounded`. */
export const DEFAULT_GROUNDING_THRESHOLD = 0.5;

export interface GroundingInput {
  /** Texts the answer may rely on (system, user and tool messages). */
  sources: readonly string[];
  /** The text to check. */
  answer: string;
  /** The user's question; its words are never taken as evidence of hallucination. */
  question?: string | undefined;
}

export interface GroundingOptions {
  /** Minimum score for `grounded`; defaults to DEFAULT_GROUNDING_THRESHOLD. */
  threshold?: number;
  /** Calibrated model; defaults to DEFAULT_MODEL. */
  model?: Model;
  /** Reuse the index of sources seen before (same texts → same result, less CPU). */
  sourceIndexCache?: SourceIndexCache;
}

export interface GroundingResult {
  /** False when there was nothing to check: no answer text or no non-empty source. */
  checked: boolean;
  /** `score >= threshold`; true when not checked. */
  grounded: boolean;
  /** Support in 0..1, 1 = fully supported; 1 when not checked. */
  score: number;
  /** Smallest unsupported phrases, ordered by position. */
  flaggedSpans: FlaggedSpan[];
}

/**
 * Checks whether `answer` is supported by `sources`, offline and in well under a millisecond for
 * chat-sized inputs. Pure: no I/O, no state between calls (beyond the optional index cache, which
 * does not change results).
 *
 * @example
 * const r = checkGrounding({
 *   sources: ['The Oberoi Group is a hotel company with its head office in Delhi.'],
 *   question: 'Where is the head office of the Oberoi Group?',
 *   answer: 'Mumbai, the financial capital of India.',
 * });
 * r.grounded; // false
 * r.flaggedSpans.map((s) => s.reason);
 * // ["little support (0.00)", "'Mumbai' is not in the sources", "'India' is not in the sources"]
 */
export function checkGrounding(input: GroundingInput, options: GroundingOptions = {}): GroundingResult {
  const threshold = options.threshold ?? DEFAULT_GROUNDING_THRESHOLD;
  const analysis = analyze(input.sources, input.answer, input.question ?? undefined, options.sourceIndexCache);
  if (!analysis) return { checked: false, grounded: true, score: 1, flaggedSpans: [] };
  const score = 1 - predict(options.model ?? DEFAULT_MODEL, analysis.features, analysis.contentWords);
  const rounded = Math.round(score * 1000) / 1000;
  return { checked: true, grounded: rounded >= threshold, score: rounded, flaggedSpans: analysis.spans };
}
