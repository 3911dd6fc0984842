import { checkGrounding } from '@svc/grounding';
import type { SvcResult } from '@svc/protocol';
import { groundingSources, lastUserText } from './prompt.js';

export interface GroundingRequest {
  messages: unknown;
  answer: string;
  /** `svc.dehallucinate` as requested (default true). */
  requested: boolean;
  signal?: AbortSignal;
}

/** Produces the response's `svc` object (design §3). */
export interface Grounder {
  check(request: GroundingRequest): Promise<SvcResult>;
}

export function notChecked(requested: boolean): SvcResult {
  return { dehallucinate_requested: requested, grounded: true, score: 1, flagged_spans: [], checked: false };
}

/** The offline check of `@svc/grounding`: runs when requested, the answer has text and there is a source. */
export function createOfflineGrounder(): Grounder {
  return {
    async check({ messages, answer, requested }) {
      if (!requested || answer.trim() === '') return notChecked(requested);
      const sources = groundingSources(messages);
      if (sources.length === 0) return notChecked(requested);
      const result = checkGrounding({ sources, answer, question: lastUserText(messages) });
      if (!result.checked) return notChecked(requested);
      return {
        dehallucinate_requested: true,
        grounded: result.grounded,
        score: result.score,
        flagged_spans: result.flaggedSpans,
        checked: true,
      };
    },
  };
}
