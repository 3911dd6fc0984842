export {
  checkGrounding,
  DEFAULT_GROUNDING_THRESHOLD,
  type GroundingInput,
  type GroundingOptions,
  type GroundingResult,
} from './check.js';
export type { FlaggedSpan } from './analyze.js';
export { mergeJudgeSpans, JUDGE_REASON } from './judge.js';
export { DEFAULT_MODEL, type Model } from './model.js';
export { SourceIndexCache } from './source-index.js';
