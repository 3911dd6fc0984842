import type { ChatCompletionChunk } from '@svc/protocol';

const OPEN = '<think>';
const CLOSE = '</think>';

/**
 * Models whose chat template opens the think block in the prompt (it ends `<｜Assistant｜><think>\n`), so that a
 * server without a reasoning parser (vLLM without `--reasoning-parser`, llama.cpp with `--reasoning-format none`)
 * sends "reasoning…</think>answer" with no opening tag: DeepSeek-R1 and its distills, QwQ, and Qwen3's thinking-only
 * models (`Qwen3-30B-A3B-Thinking-2507`, `Qwen3-Next-80B-A3B-Thinking`, `qwen3:4b-thinking-2507`), optionally behind an
 * organisation or router prefix (`deepseek-ai/DeepSeek-R1-Distill-Qwen-7B`).
 * These are the families vLLM's `deepseek_r1` and `qwen3` parsers read the same way. Hybrid models (Qwen3-8B,
 * DeepSeek-V3.1), whose template closes the block in the prompt when thinking is off, are not among them.
 */
const OPENS_IN_PROMPT = /(?:^|[/:_-])(?:deepseek-r1|r1-distill|qwq)(?:$|[/:_.-])|qwen3[^/]*-thinking/i;

/** True when `model`'s template opens `<think>` in the prompt (see `OPENS_IN_PROMPT`): its text starts inside the block. */
export function opensThinkInPrompt(model: string): boolean {
  return OPENS_IN_PROMPT.test(model);
}

/**
 * A leading `<think>…</think>` block of `content` (what Ollama's OpenAI-compatible API, vLLM without a
 * reasoning parser and llama.cpp with `--reasoning-format none` send for DeepSeek-R1- and Qwen3-style models)
 * as reasoning: `{ reasoning, content }` with the answer's leading white space dropped; null when `content`
 * does not open with the tag (white space before it allowed). An unclosed block is all reasoning.
 *
 * With `opened` (a model whose template opened the block in the prompt, `opensThinkInPrompt`), the text starts
 * inside the block whether or not it repeats the tag: what comes before the first `</think>` is reasoning. A text
 * without the tag and without `</think>` is all reasoning when `finish` is `length` (cut while thinking, as vLLM's
 * `deepseek_r1` parser reads it) and the answer otherwise (null: a host that parsed the reasoning away or hides it).
 *
 * @example
 * splitThink('<think>The doc says Paris.</think>\n\nParis.') // → { reasoning: 'The doc says Paris.', content: 'Paris.' }
 * splitThink('The doc says Paris.</think>\n\nParis.', true) // → the same
 */
export function splitThink(content: string, opened = false, finish: string | null = null): { reasoning: string; content: string } | null {
  const start = content.length - content.trimStart().length;
  const tagged = content.startsWith(OPEN, start);
  if (!tagged && !opened) return null;
  const from = tagged ? start + OPEN.length : 0;
  const end = content.indexOf(CLOSE, from);
  if (end === -1) return tagged || finish === 'length' ? { reasoning: content.slice(from), content: '' } : null;
  return { reasoning: content.slice(from, end), content: content.slice(end + CLOSE.length).trimStart() };
}

/**
 * Characters of an opened block's text held back while it may still be an answer (`ThinkTags`, opened mode). A
 * model's whole context is a few hundred thousand tokens' worth of text, so past a million characters without
 * `</think>` a stream is surely thinking, and its text goes on as reasoning: the hold costs each open stream at
 * most ~2 MB, not the 32 MiB a non-streamed answer may have.
 */
const MAX_HELD_CHARS = 1024 * 1024;

/**
 * Where one choice's stream is: before its first text, inside the block, inside a block the prompt opened (not yet
 * known to be one: held back), just after the block, or in the answer.
 */
const enum State {
  Start,
  Thinking,
  Opened,
  After,
  Answer,
}

interface ChoiceState {
  state: State;
  /** Start: the prefix of the tag seen so far, after `space`; Thinking: a tail that may begin `</think>`. */
  held: string;
  /** Start: the white space seen before any other text (sent on as content if no tag follows). */
  space: string;
  /** Opened: the text held back so far (`held` is its last characters, which may begin `</think>`), and its length. */
  parts?: string[];
  size?: number;
}

/**
 * `splitThink` over a stream: each choice's `delta.content` is moved to `delta.reasoning_content` while it is
 * inside a leading `<think>` block, whatever frames the tags are split across (`<th` + `ink>`). Text that may
 * still turn out to be a tag is held back (a few characters) and sent with the next frame, with the
 * choice's finish, or by `flush` when the stream ends without one. A choice whose text does not open with the tag is passed on as
 * it came, after its first characters.
 *
 * With `opened` (the model's template opened the block in the prompt, `opensThinkInPrompt`), a text that does not
 * open with the tag is held back until its `</think>` (then it goes on as reasoning, and what follows as the
 * answer) or the choice's finish: `length` means it was cut while thinking (reasoning), any other finish that it
 * was an answer after all (a host that parsed the reasoning away, or hides it). This is what `splitThink` gives
 * the same text with the same finish. A choice whose deltas carry reasoning of their own (the server has a
 * reasoning parser) is passed on as it came.
 *
 * @example
 * const tags = new ThinkTags();
 * for (const chunk of chunks) tags.apply(chunk); // in place
 */
export class ThinkTags {
  /**
   * Choice 0's state apart, and a map only for other choices: every open stream holds one of these, and
   * nearly every stream has choice 0 alone, so a frame of the answer costs one field read.
   */
  private first: ChoiceState | undefined;
  private others: Map<number, ChoiceState> | undefined;

  constructor(private readonly opened = false) {}

  /** Rewrites `chunk`'s deltas in place. */
  apply(chunk: ChatCompletionChunk): void {
    for (const choice of chunk.choices) {
      const at = this.stateOf(choice.index);
      if (at.state === State.Answer) continue;
      const delta = choice.delta as Record<string, unknown>;
      const text = typeof delta.content === 'string' ? delta.content : '';
      const finish = choice.finish_reason ?? null;
      if (this.opened && at.state === State.Start && typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
        // The server separates the reasoning itself: its content is the answer.
        at.state = State.Answer;
        if (at.space !== '' || at.held !== '') delta.content = at.space + at.held + text;
        at.space = at.held = '';
        continue;
      }
      if (text === '' && finish === null) continue;
      const { reasoning, content } = this.step(at, text, finish);
      if (reasoning !== '') delta.reasoning_content = typeof delta.reasoning_content === 'string' ? delta.reasoning_content + reasoning : reasoning;
      if (content !== '' || typeof delta.content === 'string') delta.content = content;
    }
  }

  /**
   * At the stream's end: the text still held back for each choice that has some (a tail that was not a tag
   * after all), as the choices of one last chunk: content before the block was known, reasoning inside it.
   * Empty when nothing is held. An upstream that ends with `[DONE]` and no `finish_reason` ends here.
   */
  flush(): ChatCompletionChunk['choices'] {
    const choices: ChatCompletionChunk['choices'] = [];
    const add = (index: number, at: ChoiceState): void => {
      if ((at.held === '' && at.space === '' && at.size === undefined) || at.state === State.Answer) return;
      // No finish: an opened text without its `</think>` is taken as the answer, as a `stop` would be.
      const { reasoning, content } = this.step(at, '', 'stop');
      if (reasoning === '' && content === '') return;
      const delta: Record<string, unknown> = {};
      if (content !== '') delta.content = content;
      if (reasoning !== '') delta.reasoning_content = reasoning;
      choices.push({ index, delta, finish_reason: null, logprobs: null } as ChatCompletionChunk['choices'][number]);
    };
    if (this.first) add(0, this.first);
    for (const [index, at] of this.others ?? []) add(index, at);
    return choices;
  }

  private stateOf(index: number): ChoiceState {
    if (index === 0) return (this.first ??= { state: State.Start, held: '', space: '' });
    const others = (this.others ??= new Map());
    let at = others.get(index);
    if (at === undefined) {
      at = { state: State.Start, held: '', space: '' };
      others.set(index, at);
    }
    return at;
  }

  private step(at: ChoiceState, text: string, finish: string | null): { reasoning: string; content: string } {
    const finishing = finish !== null;
    let reasoning = '';
    let rest = text;
    if (at.state === State.Start) {
      // Only this frame's text is trimmed: the white space before it is in `space`, never scanned again, so
      // an upstream that streams megabytes of white space in small frames costs time linear in its size.
      let seen = at.held + rest;
      if (at.held === '') {
        const trimmed = seen.trimStart();
        at.space += seen.slice(0, seen.length - trimmed.length);
        seen = trimmed;
      }
      if (seen.startsWith(OPEN)) {
        at.state = State.Thinking;
        at.held = '';
        at.space = '';
        rest = seen.slice(OPEN.length);
      } else if (OPEN.startsWith(seen) && !finishing) {
        // White space, or a prefix of the tag: not known yet.
        at.held = seen;
        return { reasoning: '', content: '' };
      } else if (this.opened) {
        at.state = State.Opened;
        at.parts = [];
        at.size = 0;
        rest = at.space + seen;
        at.held = '';
        at.space = '';
      } else {
        const content = at.space + seen;
        at.state = State.Answer;
        at.held = '';
        at.space = '';
        return { reasoning: '', content };
      }
    }
    if (at.state === State.Opened) {
      const parts = at.parts!;
      // Only the new text and the tail before it are searched: a long block costs time linear in its size.
      const seen = at.held + rest;
      const end = seen.indexOf(CLOSE);
      if (end !== -1) {
        parts.push(seen.slice(0, end));
        reasoning = parts.join('');
        at.parts = at.size = undefined;
        at.held = '';
        at.state = State.After;
        rest = seen.slice(end + CLOSE.length);
      } else if (finishing || (at.size ?? 0) + seen.length > MAX_HELD_CHARS) {
        parts.push(seen);
        const all = parts.join('');
        at.parts = at.size = undefined;
        at.held = '';
        if (finish === 'length' || !finishing) {
          at.state = State.Thinking;
          if (!finishing) return this.step(at, all, null);
          return { reasoning: all, content: '' };
        }
        at.state = State.Answer;
        return { reasoning: '', content: all };
      } else {
        const keep = partialTagAtEnd(seen);
        parts.push(seen.slice(0, seen.length - keep));
        at.size = (at.size ?? 0) + seen.length - keep;
        at.held = seen.slice(seen.length - keep);
        return { reasoning: '', content: '' };
      }
    }
    if (at.state === State.Thinking) {
      const seen = at.held + rest;
      const end = seen.indexOf(CLOSE);
      if (end === -1) {
        const keep = finishing ? 0 : partialTagAtEnd(seen);
        at.held = seen.slice(seen.length - keep);
        return { reasoning: seen.slice(0, seen.length - keep), content: '' };
      }
      reasoning = seen.slice(0, end);
      at.held = '';
      at.state = State.After;
      rest = seen.slice(end + CLOSE.length);
    }
    // After the block: the white space before the answer is dropped, as `splitThink` drops it.
    const answer = rest.trimStart();
    if (answer !== '') at.state = State.Answer;
    return { reasoning, content: answer };
  }
}

/** How many characters at the end of `text` could begin `</think>` (0 to 7). */
function partialTagAtEnd(text: string): number {
  for (let n = Math.min(CLOSE.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(CLOSE.slice(0, n))) return n;
  }
  return 0;
}
