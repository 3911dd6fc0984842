import { Command, Option } from 'commander';
import type { ChatCompletionChunk, ErrorBody, SvcResult, Usage } from '@svc/protocol';
import { CliError, describeNetworkError } from '../errors.js';
import { apiClientFor, globalOptions } from '../global-options.js';
import { groundingReport } from '../grounding-report.js';
import { parsePositiveInt } from '../options.js';
import { kleur, processIo, type Io } from '../output.js';
import { sseData } from '../sse.js';
import { chatCompletion } from '../response-shapes.js';

interface ChatOptions {
  thinking?: boolean;
  dehallucinate: boolean;
  stream: boolean;
  system?: string;
  maxTokens?: number;
}

const MODEL = 'svc01';

/** `svc-cli chat "PROMPT"`: one chat completion, answer on stdout, grounding result on stderr. */
export function makeChatCommand(io: Io = processIo): Command {
  return new Command('chat')
    .description('ask svc01 a question: the answer streams to stdout, the grounding result follows on stderr')
    .argument('<prompt>', 'the user message')
    .option('--thinking', 'deep reasoning mode (reasoning is shown dimmed on stderr)')
    .option('--no-dehallucinate', 'skip the grounding check')
    .option('--no-stream', 'wait for the whole answer instead of streaming it')
    .option('--system <text>', 'a system message, e.g. source text the answer must be grounded in')
    .addOption(new Option('--max-tokens <n>', 'cap on generated tokens').argParser(parsePositiveInt))
    .addHelpText(
      'after',
      `
With --json the raw response is printed instead: each stream chunk on its own line, or the whole
completion with --no-stream.

Examples:
  $ svc-cli chat "What is the capital of France?"
  $ svc-cli chat --system "$(cat notes.txt)" "Summarise the notes"
  $ svc-cli chat "Plan a three-day trip to Rome" --thinking --no-stream
  $ svc-cli chat "Hello" --no-dehallucinate --json`,
    )
    .action(async (prompt: string, opts: ChatOptions, command: Command) => {
      const { json } = globalOptions(command);
      const api = apiClientFor(command);
      const messages = [...(opts.system ? [{ role: 'system', content: opts.system }] : []), { role: 'user', content: prompt }];
      const body = {
        model: MODEL,
        messages,
        stream: opts.stream,
        ...(opts.stream ? { stream_options: { include_usage: true } } : {}),
        ...(opts.maxTokens !== undefined ? { max_tokens: opts.maxTokens } : {}),
        svc: { thinking: opts.thinking === true, dehallucinate: opts.dehallucinate },
      };

      if (!opts.stream) {
        const { data, raw } = await api.json('POST', '/v1/chat/completions', chatCompletion, body);
        if (json) {
          io.out(`${raw.trim()}\n`);
          return;
        }
        const message = data.choices[0]?.message;
        if (message?.reasoning_content) io.err(`${kleur.dim(message.reasoning_content)}\n\n`);
        const answer = message?.content ?? '';
        io.out(`${answer}\n`);
        finish(io, data.id, data.usage, data.svc, answer);
        return;
      }

      const response = await api.stream('/v1/chat/completions', body);
      let id = '';
      let answer = '';
      let usage: Usage | undefined;
      let svc: SvcResult | undefined;
      let reasoning = false;
      try {
        for await (const data of sseData(response.body)) {
          if (data === '[DONE]') break;
          if (json) io.out(`${data}\n`);
          const chunk = parseChunk(data);
          if (isErrorBody(chunk)) throw new CliError(`the answer stopped: ${chunk.error.message}${chunk.error.code ? ` (${chunk.error.code})` : ''}`);
          id ||= chunk.id;
          if (chunk.usage) usage = chunk.usage;
          if (chunk.svc) svc = chunk.svc;
          const delta = chunk.choices.find((c) => c.index === 0)?.delta;
          if (json || !delta) continue;
          if (delta.reasoning_content) {
            reasoning = true;
            io.err(kleur.dim(delta.reasoning_content));
          }
          if (delta.content) {
            if (reasoning) {
              io.err('\n\n');
              reasoning = false;
            }
            answer += delta.content;
            io.out(delta.content);
          }
        }
      } catch (err) {
        if (err instanceof CliError) throw err;
        throw new CliError(`the stream was cut off: ${describeNetworkError(err)}`, { cause: err });
      }
      if (json) return;
      io.out('\n');
      if (!svc) throw new CliError('the stream ended before the grounding result arrived');
      finish(io, id, usage, svc, answer);
    });
}

function parseChunk(data: string): ChatCompletionChunk | ErrorBody {
  try {
    return JSON.parse(data) as ChatCompletionChunk | ErrorBody;
  } catch {
    throw new CliError('the server sent a malformed stream event');
  }
}

function isErrorBody(value: ChatCompletionChunk | ErrorBody): value is ErrorBody {
  const error = (value as { error?: unknown }).error;
  return typeof error === 'object' && error !== null;
}

function finish(io: Io, id: string, usage: Usage | undefined, svc: SvcResult, answer: string): void {
  const tokens = usage ? ` · ${usage.prompt_tokens}+${usage.completion_tokens}=${usage.total_tokens} tokens` : '';
  io.err(`\n${kleur.dim(`${id}${tokens}`)}\n`);
  io.err(groundingReport(svc, answer));
}
