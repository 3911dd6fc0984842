import type { UpstreamBody } from './upstream.js';
import { UpstreamError } from './upstream.js';
import { unknownName } from './upstream-errors.js';

export type TokenLimitField = 'max_tokens' | 'max_completion_tokens';

/**
 * Fields an upstream model may refuse that svc leaves out rather than fail the request for: the sampling knobs
 * OpenAI's reasoning models refuse (svc picks the thinking model, the client cannot tell); `reasoning_effort`,
 * which OpenAI's other models refuse (an app that sets it for thinking mode sends it on every request);
 * `stream_options`, which svc adds to every stream for usage and Mistral refuses (it sends usage anyway, and svc
 * counts tokens when none comes); and `store` and `metadata`, OpenAI's stored completions, which no other
 * provider keeps and Mistral refuses. `logprobs`, `logit_bias` and the like are not among them: a client asked for
 * what they give.
 */
const DROPPABLE = ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty', 'reasoning_effort', 'stream_options', 'store', 'metadata'] as const;
type Droppable = (typeof DROPPABLE)[number];

/** What OpenAI's reasoning models refuse with `unsupported_parameter` whatever the value (temperature: any but 1). */
const REASONING_REFUSES: readonly Droppable[] = ['top_p', 'presence_penalty', 'frequency_penalty'];

/**
 * OpenAI's reasoning families: o1, o3, o4-mini, … and gpt-5 (gpt-5-mini, gpt-5.1, gpt-5-codex, …) but not
 * gpt-5-chat, optionally behind a router's `provider/` prefix (`openai/o4-mini`). They reject `max_tokens`
 * (they want `max_completion_tokens`) and any `temperature` but 1.
 */
const REASONING_MODEL = /^(?:[^/]*\/)*(?:o[1-9]\d*|gpt-5(?!-chat)(?:\.\d+)?)(?:-|$)/i;

/** True for upstream model names of OpenAI's reasoning families (see `REASONING_MODEL`). */
export function isReasoningModel(model: string): boolean {
  return REASONING_MODEL.test(model);
}

/**
 * The documented rule for the form of the token limit (design §3, docs/upstreams.md):
 *
 * 1. Models of OpenAI's reasoning families get `max_completion_tokens` (a client's `max_tokens` is renamed),
 *    no `temperature` unless it is 1 (the only value they accept; svc's default 0.1 would be refused), and no
 *    `top_p`, `presence_penalty` or `frequency_penalty`, which they refuse whatever the value.
 * 2. Every other model gets `max_tokens` (a client's `max_completion_tokens` is renamed): servers that only
 *    know `max_tokens` ignore the other name, and the answer would run unlimited.
 * 3. When the upstream nevertheless answers 400 `unsupported_parameter` for the form sent, the request is
 *    sent once more with the other form, and that model keeps the other form from then on. Likewise a 400
 *    (`unsupported_value` / `unsupported_parameter`) about `temperature`, `top_p`, `presence_penalty`,
 *    `frequency_penalty` (a reasoning model the names above miss), or `unsupported_parameter` about
 *    `reasoning_effort` (a model that does not reason): sent once more without it, and that model gets none from
 *    then on. A refused `reasoning_effort` value (the field itself taken) comes back to the client as the
 *    upstream's 400.
 *
 * One instance per upstream: it remembers what each model accepts.
 *
 * @example
 * const limits = new TokenLimits();
 * const sent = limits.adapt({ model: 'o4-mini', messages, max_tokens: 4096, temperature: 0.1 });
 * // → { model: 'o4-mini', messages, max_completion_tokens: 4096 }
 */
export class TokenLimits {
  /** Models whose upstream refused the form the rule gave them. */
  private readonly learned = new Map<string, TokenLimitField>();
  /** Fields each model's upstream refused. */
  private readonly refused = new Map<string, Set<Droppable>>();

  /** The form `model` gets. */
  fieldFor(model: string): TokenLimitField {
    return this.learned.get(model) ?? (isReasoningModel(model) ? 'max_completion_tokens' : 'max_tokens');
  }

  /** `body` with its token limit in the model's form (and a reasoning model's unsupported temperature dropped); `body` itself when nothing changes. */
  adapt(body: UpstreamBody): UpstreamBody {
    return this.withField(body, this.fieldFor(body.model));
  }

  /**
   * After the upstream refused `sent`: the body to send once more when the refusal was about the form of the
   * token limit (and the model keeps the other form from now on); null for any other refusal.
   */
  retryAfter(sent: UpstreamBody, error: unknown): UpstreamBody | null {
    for (const key of DROPPABLE) {
      if (sent[key] === undefined || !isUnsupported(error, key)) continue;
      const refused = this.refused.get(sent.model) ?? new Set();
      refused.add(key);
      this.refused.set(sent.model, refused);
      const { [key]: _refused, ...rest } = sent;
      return rest as UpstreamBody;
    }
    const field = sentField(sent);
    if (field === null || !isUnsupported(error, field)) return null;
    const other: TokenLimitField = field === 'max_tokens' ? 'max_completion_tokens' : 'max_tokens';
    this.learned.set(sent.model, other);
    return this.withField(sent, other);
  }

  /** Whether `body`'s model is sent no `key` (its value in `body` is set). */
  private drops(body: UpstreamBody, key: Droppable, reasoning: boolean): boolean {
    if (this.refused.get(body.model)?.has(key)) return true;
    if (!reasoning) return false;
    return key === 'temperature' ? body.temperature !== 1 : REASONING_REFUSES.includes(key);
  }

  private withField(body: UpstreamBody, field: TokenLimitField): UpstreamBody {
    const other: TokenLimitField = field === 'max_tokens' ? 'max_completion_tokens' : 'max_tokens';
    const reasoning = isReasoningModel(body.model);
    let dropped: Set<string> | null = null;
    for (const key of DROPPABLE) {
      if (body[key] !== undefined && this.drops(body, key, reasoning)) (dropped ??= new Set()).add(key);
    }
    if (body[other] === undefined && dropped === null) return body;
    const out: Record<string, unknown> = {};
    for (const key in body) {
      if (dropped?.has(key)) continue;
      if (key === other) {
        // The client's own `field` wins over a renamed `other` (a client that sent both).
        if (body[field] === undefined) out[field] = body[other];
      } else out[key] = body[key];
    }
    return out as UpstreamBody;
  }
}

function sentField(body: UpstreamBody): TokenLimitField | null {
  if (body.max_completion_tokens !== undefined) return 'max_completion_tokens';
  if (body.max_tokens !== undefined) return 'max_tokens';
  return null;
}

/**
 * An upstream 400 `unsupported_parameter` naming `field`, by param or in its message (OpenAI's code); for
 * `temperature` also `unsupported_value` (what OpenAI's reasoning models answer to a temperature but 1); or a
 * 400/422 `extra_forbidden` whose param is `field` or inside it (Mistral's refusal of a field it does not know); or
 * Gemini's 400 `Unknown name "field"`.
 */
function isUnsupported(error: unknown, field: TokenLimitField | Droppable): boolean {
  if (!(error instanceof UpstreamError)) return false;
  const code = error.upstreamCode;
  // Gemini's refusal of a top-level name it does not know: its message names the field (upstream-errors.ts).
  if (error.upstreamStatus === 400 && error.param === field && unknownName(error.message) === field) return true;
  if (code === 'extra_forbidden') {
    return (error.upstreamStatus === 400 || error.upstreamStatus === 422) && (error.param === field || error.param?.startsWith(`${field}.`) === true);
  }
  if (error.upstreamStatus !== 400) return false;
  // A refused sampling value (`temperature`, `top_p`, a penalty) is the field refused: a reasoning model the names
  // miss takes none but the default. A `reasoning_effort` value the model does not take (`minimal` to o4-mini,
  // `none` to gpt-5) is the client's to fix: dropping it would answer at another effort, and drop every later one.
  const valueRefusesField = field !== 'max_tokens' && field !== 'max_completion_tokens' && field !== 'reasoning_effort';
  if (code !== 'unsupported_parameter' && !(valueRefusesField && code === 'unsupported_value')) return false;
  return error.param === field || (error.param === null && error.message.includes(`'${field}'`));
}
