import type { ChatCompletionChunk, ResponseObject, ResponseOutputItem, SvcResult, Usage } from '@svc/protocol';
import type { EscapedString } from '../json-in-turns.js';
import { audioTranscript } from '../chat/answer-text.js';
import { finishedStatus, responseUsage } from './translate.js';

type MessageItem = Extract<ResponseOutputItem, { type: 'message' }>;
/** A call's item: a function's (its `arguments` streamed) or a custom tool's (its `input` streamed). */
type FunctionCallItem = Extract<ResponseOutputItem, { type: 'function_call' | 'custom_tool_call' }>;
type ReasoningItem = Extract<ResponseOutputItem, { type: 'reasoning' }>;

/** The open content part of the open message: text or a refusal, each with its own event names. */
interface OpenPart {
  kind: 'output_text' | 'refusal';
  index: number;
  text: string;
}

/**
 * Turns a chat completion stream into the Responses API's semantic events, in OpenAI's order:
 * `response.created`, `response.in_progress`, then per output item `output_item.added`, its parts and deltas,
 * `output_item.done`, and last `response.completed` (or `response.incomplete` / `response.failed`).
 * Every method returns the SSE text to write (possibly empty); `sequence_number` counts every event.
 *
 * @example
 * const events = new ResponseEvents(pendingResponse(base), newItemId, now);
 * write(events.start());
 * for (const chunk of chatChunks) write(events.chunk(chunk));
 * write(events.finish());
 */
export class ResponseEvents {
  private sequence = 0;
  private out = '';
  private readonly output: ResponseOutputItem[] = [];
  private reasoning: ReasoningItem | null = null;
  private message: MessageItem | null = null;
  private part: OpenPart | null = null;
  /**
   * The open function calls, by their chat `tool_calls[].index`. The first streams as it comes; the others
   * are held and sent whole when the calls close, since OpenAI sends one item at a time (a second call's
   * `output_item.added` after the first's `output_item.done`) and a chat stream does not say when a call's
   * arguments are complete until the stream ends.
   */
  private readonly calls = new Map<number, FunctionCallItem>();
  private liveCall: { item: FunctionCallItem; outputIndex: number } | null = null;
  private finishReason: string | null = null;
  /** No text came yet: `delta.audio.transcript` pieces, if any, are the answer's text. */
  private spoken = true;
  private svc: SvcResult | undefined;
  private usage: ResponseObject['usage'] = null;
  private final: ResponseObject | null = null;

  /**
   * @param instructions the response's `instructions`, escaped once: the events that carry the whole response
   *   (created, in progress, completed, failed) splice them in rather than escape megabytes each time
   */
  constructor(
    private readonly response: ResponseObject,
    private readonly newItemId: (prefix: 'msg' | 'fc' | 'ctc' | 'rs') => string,
    private readonly now: () => number,
    private readonly instructions?: EscapedString,
  ) {}

  /** Events made so far: the next event's `sequence_number`. */
  get emitted(): number {
    return this.sequence;
  }

  start(): string {
    this.emit('response.created', { response: this.response });
    this.emit('response.in_progress', { response: this.response });
    return this.flush();
  }

  chunk(chunk: Pick<ChatCompletionChunk, 'choices' | 'usage' | 'svc'>): string {
    if (chunk.usage) this.usage = responseUsage(chunk.usage);
    if (chunk.svc) this.svc = chunk.svc;
    // One response per request: choices other than the first (n > 1) have no place in it.
    const choice = chunk.choices.find((c) => c.index === 0);
    if (choice) {
      const { delta } = choice;
      if (delta.reasoning_content) this.reason(delta.reasoning_content);
      if (delta.content) {
        this.spoken = false;
        this.text('output_text', delta.content);
      } else if (this.spoken && delta.audio !== undefined) {
        // An answer given only as audio: its transcript is the output text (until a text answer shows up).
        const transcript = audioTranscript(delta);
        if (transcript) this.text('output_text', transcript);
      }
      if (delta.refusal) this.text('refusal', delta.refusal);
      for (const call of delta.tool_calls ?? []) {
        let item = this.calls.get(call.index);
        if (!item) {
          this.closeReasoning();
          this.closeMessage();
          item =
            call.type === 'custom' || (call.type === undefined && call.custom !== undefined)
              ? { type: 'custom_tool_call', id: this.newItemId('ctc'), call_id: call.id ?? '', name: call.custom?.name ?? '', input: '', status: 'in_progress' }
              : { type: 'function_call', id: this.newItemId('fc'), call_id: call.id ?? '', name: call.function?.name ?? '', arguments: '', status: 'in_progress' };
          this.calls.set(call.index, item);
          if (this.calls.size === 1) this.liveCall = { item, outputIndex: this.addCall(item) };
        }
        const piece = item.type === 'custom_tool_call' ? call.custom?.input : call.function?.arguments;
        if (piece) {
          appendTo(item, piece);
          const live = this.liveCall;
          if (live?.item === item) this.emit(deltaEvent(item), { item_id: item.id, output_index: live.outputIndex, delta: piece });
        }
      }
      if (choice.finish_reason) this.finishReason = choice.finish_reason;
    }
    return this.flush();
  }

  /** After the chat stream's last frame: closes what is open and sends the final response. */
  finish(): string {
    const status = finishedStatus(this.finishReason);
    const itemStatus = status.status === 'completed' ? 'completed' : 'incomplete';
    this.closeReasoning(itemStatus);
    this.closeMessage(itemStatus);
    this.closeCalls(itemStatus);
    const response: ResponseObject = {
      ...this.response,
      ...status,
      completed_at: this.now(),
      output: this.output,
      usage: this.usage,
      ...(this.svc && { svc: this.svc }),
    };
    this.final = response;
    this.emit(status.status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
    return this.flush();
  }

  /**
   * The stream broke after it started: `response.failed` with the error, as OpenAI ends a failed stream, and
   * `usage` (what was generated until then) when upstream reported none.
   */
  fail(error: { code: string; message: string }, usage?: Usage): string {
    this.closeReasoning('incomplete');
    this.closeMessage('incomplete');
    this.closeCalls('incomplete');
    const response: ResponseObject = {
      ...this.response,
      status: 'failed',
      error,
      output: this.output,
      usage: this.usage ?? (usage ? responseUsage(usage) : null),
    };
    this.final = response;
    this.emit('response.failed', { response });
    return this.flush();
  }

  /**
   * The client left before the end: the response as far as it got, `incomplete` with its open items
   * `incomplete` (what is stored; no event is written, nobody reads it), or as it finished when the
   * upstream had finished it (the client left during the grounding check or before the last frames). OpenAI ends a stream the client
   * closed, and keeps the response; `usage` is what was generated so far.
   */
  abandon(usage: Usage): ResponseObject {
    // Already ended (the client left while the ended stream was being stored): that is the response.
    if (this.final) return this.final;
    if (this.finishReason !== null) {
      // The answer was whole (the upstream finished it) when the client left: stored as it finished.
      this.usage ??= responseUsage(usage);
      this.finish();
      this.out = '';
      return this.result;
    }
    this.closeReasoning('incomplete');
    this.closeMessage('incomplete');
    this.closeCalls('incomplete');
    this.out = '';
    this.final = {
      ...this.response,
      status: 'incomplete',
      incomplete_details: null,
      output: this.output,
      usage: this.usage ?? responseUsage(usage),
      ...(this.svc && { svc: this.svc }),
    };
    return this.final;
  }

  /** The response as it ended (what is stored), once `finish`, `fail` or `abandon` has run. */
  get result(): ResponseObject {
    if (!this.final) throw new Error('ResponseEvents.result read before the stream ended');
    return this.final;
  }

  /** Reasoning text (thinking mode's `reasoning_content`) as a reasoning item's one summary part. */
  private reason(delta: string): void {
    if (!this.reasoning) {
      this.reasoning = { type: 'reasoning', id: this.newItemId('rs'), summary: [], status: 'in_progress' };
      const outputIndex = this.output.push(this.reasoning) - 1;
      this.emit('response.output_item.added', { output_index: outputIndex, item: this.reasoning });
      this.reasoning.summary.push({ type: 'summary_text', text: '' });
      this.emit('response.reasoning_summary_part.added', {
        item_id: this.reasoning.id,
        output_index: outputIndex,
        summary_index: 0,
        part: { type: 'summary_text', text: '' },
      });
    }
    this.reasoning.summary[0]!.text += delta;
    const outputIndex = this.output.indexOf(this.reasoning);
    this.emit('response.reasoning_summary_text.delta', { item_id: this.reasoning.id, output_index: outputIndex, summary_index: 0, delta });
  }

  private closeReasoning(status: ReasoningItem['status'] = 'completed'): void {
    const item = this.reasoning;
    if (!item) return;
    this.reasoning = null;
    const where = { item_id: item.id, output_index: this.output.indexOf(item), summary_index: 0 };
    const text = item.summary[0]!.text;
    this.emit('response.reasoning_summary_text.done', { ...where, text });
    this.emit('response.reasoning_summary_part.done', { ...where, part: { type: 'summary_text', text } });
    item.status = status;
    this.emit('response.output_item.done', { output_index: where.output_index, item });
  }

  private text(kind: OpenPart['kind'], delta: string): void {
    this.closeReasoning();
    if (!this.message) {
      this.closeCalls('completed');
      this.message = { type: 'message', id: this.newItemId('msg'), status: 'in_progress', role: 'assistant', content: [] };
      this.output.push(this.message);
      this.emit('response.output_item.added', { output_index: this.output.length - 1, item: { ...this.message, content: [] } });
    }
    if (this.part?.kind !== kind) {
      this.closePart();
      this.part = { kind, index: this.message.content.length, text: '' };
      this.message.content.push(partOf(this.part));
      this.emit('response.content_part.added', { ...this.where(), content_index: this.part.index, part: partOf(this.part) });
    }
    this.part.text += delta;
    const name = kind === 'output_text' ? 'response.output_text.delta' : 'response.refusal.delta';
    this.emit(name, { ...this.where(), content_index: this.part.index, delta, ...(kind === 'output_text' && { logprobs: [] }) });
  }

  private closePart(): void {
    const part = this.part;
    if (!part || !this.message) return;
    this.part = null;
    const done = partOf(part);
    this.message.content[part.index] = done;
    if (part.kind === 'output_text') {
      this.emit('response.output_text.done', { ...this.where(), content_index: part.index, text: part.text, logprobs: [] });
    } else {
      this.emit('response.refusal.done', { ...this.where(), content_index: part.index, refusal: part.text });
    }
    this.emit('response.content_part.done', { ...this.where(), content_index: part.index, part: done });
  }

  private closeMessage(status: MessageItem['status'] = 'completed'): void {
    if (!this.message) return;
    this.closePart();
    this.message.status = status;
    this.emit('response.output_item.done', { output_index: this.output.indexOf(this.message), item: this.message });
    this.message = null;
  }

  /** Adds a call to the output, announced with its arguments (or input) still empty; returns its output index. */
  private addCall(item: FunctionCallItem): number {
    const outputIndex = this.output.push(item) - 1;
    const empty = item.type === 'custom_tool_call' ? { ...item, input: '' } : { ...item, arguments: '' };
    this.emit('response.output_item.added', { output_index: outputIndex, item: { ...empty, status: 'in_progress' } });
    return outputIndex;
  }

  private closeCalls(status: FunctionCallItem['status']): void {
    for (const item of this.calls.values()) {
      const live = this.liveCall?.item === item ? this.liveCall : null;
      const outputIndex = live ? live.outputIndex : this.addCall(item);
      const where = { item_id: item.id, output_index: outputIndex };
      const text = item.type === 'custom_tool_call' ? item.input : item.arguments;
      if (!live && text) this.emit(deltaEvent(item), { ...where, delta: text });
      item.status = status;
      // OpenAI's done event of a custom call carries its whole input (and no name), a function call's its arguments and name.
      if (item.type === 'custom_tool_call') this.emit('response.custom_tool_call_input.done', { ...where, input: item.input });
      else this.emit('response.function_call_arguments.done', { ...where, name: item.name, arguments: item.arguments });
      this.emit('response.output_item.done', { output_index: outputIndex, item });
    }
    this.calls.clear();
    this.liveCall = null;
  }

  private where(): { item_id: string; output_index: number } {
    const message = this.message!;
    return { item_id: message.id, output_index: this.output.indexOf(message) };
  }

  private emit(type: string, fields: Record<string, unknown>): void {
    const event = { type, sequence_number: this.sequence++, ...fields };
    const json = this.instructions && 'response' in fields ? this.instructions.stringify(event) : JSON.stringify(event);
    this.out += `event: ${type}\ndata: ${json}\n\n`;
  }

  private flush(): string {
    const text = this.out;
    this.out = '';
    return text;
  }
}

/** The event a piece of a call's arguments (a function's) or input (a custom tool's) goes out in. */
function deltaEvent(item: FunctionCallItem): string {
  return item.type === 'custom_tool_call' ? 'response.custom_tool_call_input.delta' : 'response.function_call_arguments.delta';
}

function appendTo(item: FunctionCallItem, piece: string): void {
  if (item.type === 'custom_tool_call') item.input += piece;
  else item.arguments += piece;
}

function partOf(part: OpenPart): MessageItem['content'][number] {
  return part.kind === 'output_text'
    ? { type: 'output_text', text: part.text, annotations: [], logprobs: [] }
    : { type: 'refusal', refusal: part.text };
}
