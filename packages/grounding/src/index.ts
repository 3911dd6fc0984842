export {
  aggregate,
  boundedInput,
  checkGrounding,
  DEFAULT_GROUNDING_THRESHOLD,
  MAX_ANSWER_CHARS,
  MAX_SOURCE_CHARS,
  unsupportedTermScore,
  type ClaimResult,
  type Evidence,
  type FlaggedSpan,
  type GroundingInput,
  type GroundingOptions,
  type GroundingResult,
} from './check.js';
export { mergeJudgeSpans, JUDGE_REASON } from './judge.js';
export { DEFAULT_MODEL, FEATURE_NAMES, type Model } from './model.js';
export { SourceIndexCache } from './source-index.js';
export { hasCjk, stem } from './tokenize.js';
export { NEGATIONS, STOPWORDS } from './lexicon.js';
export {
  chooseThreshold,
  labelledScores,
  MIN_CALIBRATION_ROWS,
  ThresholdError,
  thresholdMetrics,
  type LabelledAnswer,
  type LabelledScore,
  type ThresholdChoice,
  type ThresholdErrorCode,
  type ThresholdMetrics,
} from './threshold.js';
export { jsonValuesText, MAX_JSON_ANSWER_CHARS } from './json-answer.js';
export { seededRandom } from './seeded-random.js';
