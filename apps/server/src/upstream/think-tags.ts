import type { ChatCompletionChunk } from '@svc/protocol';

const OPEN = '<think>';
const CLOSE = '</think>';

/**
 * A leading `<think>…</think>` block of `content` (what Ollama's OpenAI-compatible API, vLLM without a
 * reasoning parser and llama.cpp with `--reasoning-format none` send for DeepSeek-R1- and Qwen3-style models)
 * as reasoning: `{ reasoning, content }` with the answer's leading white space dropped; null when `content`
 * does not open with the tag (white space before it allowed). An unclosed block is all reasoning.
 *
 * @example
 * splitThink('<think>The doc says Paris.</think>\n\nParis.') // → { reasoning: 'The doc says Paris.', content: 'Paris.' }
 */
export function splitThink(content: string): { reasoning: string; content: string } | null {
  const start = content.length - content.trimStart().length;
  if (!content.startsWith(OPEN, start)) return null;
  const from = start + OPEN.length;
  const end = content.indexOf(CLOSE, from);
  if (end === -1) return { reasoning: content.slice(from), content: '' };
  return { reasoning: content.slice(from, end), content: content.slice(end + CLOSE.length).trimStart() };
}

/** Where one choice's stream is: before its first text, inside the block, just after it, or in the answer. */
const enum State {
  Start,
  Thinking,
  After,
  Answer,
}

interface ChoiceState {
  state: State;
  /** Start: the prefix of the tag seen so far, after `space`; Thinking: a tail that may begin `</think>`. */
  held: string;
  /** Start: the white space seen before any other text (sent on as content if no tag follows). */
  space: string;
}

/**
 * `splitThink` over a stream: each choice's `delta.content` is moved to `delta.reasoning_content` while it is
 * inside a leading `<think>` block, whatever frames the tags are split across (`<th` + `ink>`). Text that may
 * still turn out to be a tag is held back (a few characters) and sent with the next frame, with the
 * choice's finish, or by `flush` when the stream ends without one. A choice whose text does not open with the tag is passed on as
 * it came, after its first characters.
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

  /** Rewrites `chunk`'s deltas in place. */
  apply(chunk: ChatCompletionChunk): void {
    for (const choice of chunk.choices) {
      const at = this.stateOf(choice.index);
      if (at.state === State.Answer) continue;
      const delta = choice.delta as Record<string, unknown>;
      const text = typeof delta.content === 'string' ? delta.content : '';
      const finishing = choice.finish_reason !== null && choice.finish_reason !== undefined;
      if (text === '' && !finishing) continue;
      const { reasoning, content } = this.step(at, text, finishing);
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
      if ((at.held === '' && at.space === '') || at.state === State.Answer) return;
      const { reasoning, content } = this.step(at, '', true);
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

  private step(at: ChoiceState, text: string, finishing: boolean): { reasoning: string; content: string } {
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
      } else {
        const content = at.space + seen;
        at.state = State.Answer;
        at.held = '';
        at.space = '';
        return { reasoning: '', content };
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
