import { setTimeout as delay } from 'node:timers/promises';

export interface ChatOutcome {
  status: number;
  requestId: string;
  /** Non-streamed: the JSON body. */
  body?: any;
  /** Streamed: every `data:` payload, parsed (the `[DONE]` marker as the string). */
  events?: Array<any>;
  /** Streamed: the text of the content deltas. */
  text?: string;
}

/** Sends one chat completion (one user message) over fetch; the response is the caller's to read. */
export function postChat(baseUrl: string, token: string, options: { stream: boolean; content?: string; signal?: AbortSignal }): Promise<Response> {
  return fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc01', stream: options.stream, messages: [{ role: 'user', content: options.content ?? 'Say hello.' }] }),
    signal: options.signal ?? AbortSignal.timeout(20_000),
  });
}

/** One chat completion over fetch, read to the end (streamed or not). */
export async function chat(baseUrl: string, token: string, options: { stream: boolean; content?: string; signal?: AbortSignal }): Promise<ChatOutcome> {
  const res = await postChat(baseUrl, token, options);
  const raw = await res.text();
  const requestId = res.headers.get('x-request-id') ?? '';
  if (!options.stream || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    return { status: res.status, requestId, body: raw ? JSON.parse(raw) : undefined };
  }
  const events = raw
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => {
      const data = block.slice('data: '.length);
      return data === '[DONE]' ? data : JSON.parse(data);
    });
  const text = events
    .filter((e) => typeof e === 'object' && Array.isArray(e.choices))
    .map((e) => e.choices.map((c: any) => c.delta?.content ?? '').join(''))
    .join('');
  return { status: res.status, requestId, events, text };
}

/** Active handles by type (`process.getActiveResourcesInfo()`), e.g. { TCPSocketWrap: 4, Timeout: 2 }. */
export function activeResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of process.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

/** Polls `fn` until truthy; throws after `timeoutMs`. */
export async function until<T>(fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what} not met after ${timeoutMs} ms`);
    await delay(20);
  }
}
