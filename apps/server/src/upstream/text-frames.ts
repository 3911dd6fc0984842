import type { ChatCompletionChunk } from '@svc/protocol';

/** Between the head and the text: choice 0, a delta with `content` alone. */
const TEXT_OPEN = '{"index":0,"delta":{"content":"';
/** After the text: the rest of the choice and of `choices`. */
const TEXT_CLOSE = '"},"logprobs":null,"finish_reason":null}]';
/** OpenAI's per-frame padding, the one key after `choices` read here. */
const OBFUSCATION = ',"obfuscation":"';

/**
 * Reads the frame nearly every upstream stream is made of — one text delta of choice 0, nothing else — from
 * its bytes instead of `JSON.parse`, which would otherwise be the largest share of the relay's own work.
 *
 * A stream repeats the same frame head in every frame: `{"id":…,"object":…,"created":…,"model":…,` then
 * `"service_tier":…,` and `"system_fingerprint":…,` when present (the order of OpenAI, vLLM and Ollama), then
 * `"choices":[`. `learn()` takes it from a frame that was parsed and checked, when its keys are those, in
 * that order, and its bytes are exactly their JSON. `read()` then accepts a frame only when it is that head,
 * `{"index":0,"delta":{"content":"TEXT"},"logprobs":null,"finish_reason":null}]`, and `}` or
 * `,"obfuscation":"…"}`, with no `"`, `\` or control character in TEXT or the padding. What it returns
 * equals `JSON.parse(data)`, key order included, and is what the frame check (`plainChunk`) would pass as
 * received; every other frame (escapes, tool calls, finishes, usage, another choice, other keys or spacing)
 * is undefined and goes the parsing way.
 *
 * @example
 * const frames = new TextFrames();
 * const chunk = frames.read(event.data) ?? parseAndCheck(event.data); // then, for a parsed frame:
 * frames.learn(event.data, chunk);
 */
export class TextFrames {
  private learned: Learned | null = null;

  /** Keeps `data`'s head when `chunk` (its checked parse, keys as received) allows one. */
  learn(data: string, chunk: ChatCompletionChunk): void {
    // The head learned already (a stream's later frames repeat it): nothing to build.
    const known = this.learned?.head;
    if (known !== undefined && data.slice(0, known.length) === known) return;
    const keys = Object.keys(chunk);
    if (keys[0] !== 'id' || keys[1] !== 'object' || keys[2] !== 'created' || keys[3] !== 'model') return;
    // Any other key before `choices` makes the bytes differ from the head built below.
    const tier = keys[4] === 'service_tier';
    const fingerprint = keys[tier ? 5 : 4] === 'system_fingerprint';
    const fields: HeadFields = { id: chunk.id, object: chunk.object, created: chunk.created, model: chunk.model };
    if (tier) fields.service_tier = (chunk as Record<string, unknown>).service_tier;
    if (fingerprint) fields.system_fingerprint = chunk.system_fingerprint;
    const head = `${JSON.stringify(fields).slice(0, -1)},"choices":[`;
    if (data.slice(0, head.length) !== head) return;
    this.learned = { head, opening: head + TEXT_OPEN, fields, shape: (tier ? 2 : 0) + (fingerprint ? 1 : 0) };
  }

  /** The frame as `JSON.parse` gives it, when it is a text frame of the learned head; else undefined. */
  read(data: string): ChatCompletionChunk | undefined {
    // Sliced strings compared with ===, not startsWith: V8's startsWith compares a character at a time
    // (~0.7 ns each, ~100 ns for a head), === of flat strings compares memory.
    const { learned } = this;
    if (learned === null) return undefined;
    const { opening, fields, shape } = learned;
    if (data.slice(0, opening.length) !== opening) return undefined;
    const end = plainStringEnd(data, opening.length);
    const rest = end + TEXT_CLOSE.length;
    if (end === -1 || data.slice(end, rest) !== TEXT_CLOSE) return undefined;
    let obfuscation: string | undefined;
    if (rest !== data.length - 1) {
      const padding = rest + OBFUSCATION.length;
      if (data.slice(rest, padding) !== OBFUSCATION || plainStringEnd(data, padding) !== data.length - 2) return undefined;
      obfuscation = data.slice(padding, data.length - 2);
    }
    if (data.charCodeAt(data.length - 1) !== 125 /* } */) return undefined;
    const choices = [{ index: 0, delta: { content: data.slice(opening.length, end) }, logprobs: null, finish_reason: null }];
    // Object literals of four fixed shapes, so that V8 builds each from a known layout; Object.assign or a
    // spread from `fields` takes its generic, far slower path on every frame.
    const { id, object, created, model, service_tier, system_fingerprint } = fields;
    let chunk: Record<string, unknown>;
    if (shape === 0) chunk = { id, object, created, model, choices };
    else if (shape === 1) chunk = { id, object, created, model, system_fingerprint, choices };
    else if (shape === 2) chunk = { id, object, created, model, service_tier, choices };
    else chunk = { id, object, created, model, service_tier, system_fingerprint, choices };
    if (obfuscation !== undefined) chunk.obfuscation = obfuscation;
    return chunk as ChatCompletionChunk;
  }
}

/** The values of a frame head, in the order they are sent. */
interface HeadFields {
  id: string;
  object: string;
  created: number;
  model: string;
  service_tier?: unknown;
  system_fingerprint?: string | null;
}

/** A learned head: its bytes, them with TEXT_OPEN (what a text frame starts with), its values and shape. */
interface Learned {
  head: string;
  opening: string;
  fields: HeadFields;
  /** 0 plain, 1 with a fingerprint, 2 with a service tier, 3 with both. */
  shape: number;
}

/**
 * Where the JSON string body starting at `start` ends (its closing `"`), when the body needs no decoding:
 * -1 at a `\` (an escape), a control character (invalid JSON) or the end of `data`.
 */
function plainStringEnd(data: string, start: number): number {
  PLAIN_CHARS.lastIndex = start;
  PLAIN_CHARS.test(data);
  const end = PLAIN_CHARS.lastIndex;
  return data.charCodeAt(end) === 34 /* " */ ? end : -1;
}
/** Characters a JSON string holds as they are (sticky: one native scan from a position beats a charCodeAt loop). */
const PLAIN_CHARS = /[^"\\\x00-\x1f]*/y;
