import { ChunkChoiceSchema, type ChatCompletionChunk, type SvcResult, type Usage } from '@svc/protocol';
import { flatten } from '../flat-string.js';

type Choice = ChatCompletionChunk['choices'][number];

/**
 * The JSON of a stream's frames: byte for byte what `JSON.stringify` gives for
 * `{ id, object, created, model, service_tier?, choices, system_fingerprint?, svc?, usage? }` (and
 * `{ …, choices: [], system_fingerprint?, usage }`), with the part before `choices` made once per stream and
 * the common choice (one text delta) written by hand: stringifying every frame whole would be most of the
 * relay's own work.
 *
 * With `includeUsage` (the client's `stream_options.include_usage`) every frame before the usage frame
 * carries `"usage": null`, as OpenAI's do.
 *
 * @example
 * const frames = new FrameJson(requestId, created, SVC_MODEL, { includeUsage: true });
 * sse.write(frames.of(chunk.choices, chunk.system_fingerprint));
 */
export class FrameJson {
  private head: string;
  private readonly start: string;
  private readonly tail: string;

  /** An upstream sends the same `system_fingerprint` in every frame: its JSON is made when it changes. */
  private fingerprint: string | null | undefined;
  private fingerprintPart = '';

  constructor(id: string, created: number, model: string, options: { includeUsage?: boolean } = {}) {
    // Both live as long as the stream: kept flat, not as the pieces they are joined from.
    this.start = flatten(`{"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${JSON.stringify(created)},"model":${JSON.stringify(model)}`);
    this.head = flatten(`${this.start},"choices":`);
    this.tail = options.includeUsage ? ',"usage":null}' : '}';
  }

  /** The upstream's `service_tier`, in every frame from now on (after `model`, as OpenAI sends it). */
  serviceTier(tier: string): void {
    this.head = flatten(`${this.start},"service_tier":${JSON.stringify(tier)},"choices":`);
  }

  /** `system_fingerprint` and `svc` are left out when undefined (as `JSON.stringify` leaves them out). */
  of(choices: readonly Choice[], systemFingerprint?: string | null, svc?: SvcResult | null): string {
    let json = this.head + (choices.length === 1 ? (textChoiceJson(choices[0]!) ?? JSON.stringify(choices)) : JSON.stringify(choices));
    if (systemFingerprint !== undefined) json += this.fingerprintJson(systemFingerprint);
    if (svc !== undefined) json += `,"svc":${JSON.stringify(svc)}`;
    return json + this.tail;
  }

  /** `,"system_fingerprint":…` for `fingerprint`. */
  private fingerprintJson(fingerprint: string | null): string {
    if (fingerprint !== this.fingerprint) {
      this.fingerprint = fingerprint;
      this.fingerprintPart = flatten(`,"system_fingerprint":${JSON.stringify(fingerprint)}`);
    }
    return this.fingerprintPart;
  }

  /** The usage frame (`choices: []`, `system_fingerprint` when known, then `usage`). */
  usage(usage: Usage, systemFingerprint?: string | null): string {
    const fingerprint = systemFingerprint !== undefined ? this.fingerprintJson(systemFingerprint) : '';
    return `${this.head}[]${fingerprint},"usage":${JSON.stringify(usage)}}`;
  }
}

/** `index, delta, logprobs, finish_reason`: the schema's order, OpenAI's on the wire. */
const CHOICE_KEYS = Object.keys(ChunkChoiceSchema.shape);

/**
 * `[choice]` as JSON when the choice is exactly `{ index, delta: { role?: 'assistant', content: string },
 * logprobs: null, finish_reason }` in that key order; undefined for any other shape (the caller stringifies).
 */
function textChoiceJson(choice: Choice): string | undefined {
  let n = 0;
  for (const key in choice) if (key !== CHOICE_KEYS[n++]) return undefined;
  if (n !== 4 || choice.logprobs !== null || !Number.isInteger(choice.index)) return undefined;
  const { finish_reason: finish, delta } = choice;
  if (finish !== null && typeof finish !== 'string') return undefined;
  let role = false;
  let content = false;
  for (const key in delta) {
    if (key === 'role' && !role && !content) role = true;
    else if (key === 'content' && !content) content = true;
    else return undefined;
  }
  if (!content || typeof delta.content !== 'string' || (role && delta.role !== 'assistant')) return undefined;
  return `[{"index":${choice.index},"delta":{${role ? '"role":"assistant",' : ''}"content":${JSON.stringify(delta.content)}},"logprobs":null,"finish_reason":${finish === null ? 'null' : JSON.stringify(finish)}}]`;
}
