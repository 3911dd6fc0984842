import { describe, expect, it } from 'vitest';
import { isReasoningModel, TokenLimits } from '../../../src/upstream/token-limit.js';
import { UpstreamError, type UpstreamBody } from '../../../src/upstream/upstream.js';

const messages = [{ role: 'user', content: 'hi' }];

describe('isReasoningModel', () => {
  it.each(['o1', 'o1-mini', 'o1-preview', 'o3', 'o3-mini-2025-01-31', 'o3-pro', 'o4-mini', 'gpt-5', 'gpt-5-mini', 'gpt-5-nano', 'gpt-5.1', 'gpt-5-codex', 'openai/o4-mini', 'openai/gpt-5'])(
    '%s is one',
    (model) => expect(isReasoningModel(model)).toBe(true),
  );
  it.each(['gpt-4o-mini', 'gpt-4.1', 'gpt-5-chat-latest', 'llama3.1:8b', 'olmo-2', 'qwen3-32b', 'mistral-small', 'omni-moderation', 'gpt-50'])('%s is not', (model) =>
    expect(isReasoningModel(model)).toBe(false),
  );
});

describe('TokenLimits', () => {
  it('sends max_completion_tokens and no temperature but 1 to reasoning models', () => {
    const limits = new TokenLimits();
    expect(limits.adapt({ model: 'o4-mini', messages, max_tokens: 4096, temperature: 0.1 })).toEqual({ model: 'o4-mini', messages, max_completion_tokens: 4096 });
    expect(limits.adapt({ model: 'o4-mini', messages, max_completion_tokens: 10, temperature: 1 })).toEqual({ model: 'o4-mini', messages, max_completion_tokens: 10, temperature: 1 });
  });

  it('sends max_tokens to other models, a client max_completion_tokens renamed', () => {
    const limits = new TokenLimits();
    const body: UpstreamBody = { model: 'gpt-4o-mini', messages, max_tokens: 4096, temperature: 0.1 };
    expect(limits.adapt(body)).toBe(body);
    expect(limits.adapt({ model: 'llama3', messages, max_completion_tokens: 50, temperature: 0.1 })).toEqual({ model: 'llama3', messages, max_tokens: 50, temperature: 0.1 });
  });

  it("keeps a client's own field when it sent both", () => {
    expect(new TokenLimits().adapt({ model: 'o3', messages, max_tokens: 10, max_completion_tokens: 20 })).toEqual({ model: 'o3', messages, max_completion_tokens: 20 });
  });

  it('retries once in the other form after 400 unsupported_parameter for the form sent, and remembers it per model', () => {
    const limits = new TokenLimits();
    const sent = limits.adapt({ model: 'my-reasoner', messages, max_tokens: 100 });
    const refusal = new UpstreamError('upstream_invalid_request', "Unsupported parameter: 'max_tokens'.", {
      upstreamStatus: 400,
      upstreamCode: 'unsupported_parameter',
      param: 'max_tokens',
    });
    expect(limits.retryAfter(sent, refusal)).toEqual({ model: 'my-reasoner', messages, max_completion_tokens: 100 });
    expect(limits.fieldFor('my-reasoner')).toBe('max_completion_tokens');
    expect(limits.fieldFor('other')).toBe('max_tokens');
  });

  it('does not retry other refusals', () => {
    const limits = new TokenLimits();
    const sent = limits.adapt({ model: 'm', messages, max_tokens: 100 });
    const about = (param: string, code = 'unsupported_parameter') =>
      new UpstreamError('upstream_invalid_request', 'no', { upstreamStatus: 400, upstreamCode: code, param });
    expect(limits.retryAfter(sent, about('top_p'))).toBeNull();
    expect(limits.retryAfter(sent, about('max_completion_tokens'))).toBeNull();
    expect(limits.retryAfter(sent, about('max_tokens', 'invalid_value'))).toBeNull();
    expect(limits.retryAfter(sent, new UpstreamError('upstream_error', 'HTTP 500', { upstreamStatus: 500 }))).toBeNull();
    expect(limits.fieldFor('m')).toBe('max_tokens');
  });

  it('retries once without temperature after a 400 about it (a reasoning model the names miss), and sends none to that model from then on', () => {
    const limits = new TokenLimits();
    const sent = limits.adapt({ model: 'o9-future', messages, max_tokens: 10, temperature: 0.1 });
    // o9 is in the family by name already; a name the rule cannot know:
    const unknown = limits.adapt({ model: 'acme-thinker', messages, max_tokens: 10, temperature: 0.1 });
    expect(sent).not.toHaveProperty('temperature');
    expect(unknown).toHaveProperty('temperature', 0.1);
    const refusal = new UpstreamError('upstream_invalid_request', "Unsupported value: 'temperature' does not support 0.1 with this model.", {
      upstreamStatus: 400,
      upstreamCode: 'unsupported_value',
      param: 'temperature',
    });
    expect(limits.retryAfter(unknown, refusal)).toEqual({ model: 'acme-thinker', messages, max_tokens: 10 });
    expect(limits.adapt({ model: 'acme-thinker', messages, max_tokens: 10, temperature: 0.7 })).toEqual({ model: 'acme-thinker', messages, max_tokens: 10 });
    expect(limits.adapt({ model: 'other', messages, temperature: 0.7 })).toEqual({ model: 'other', messages, temperature: 0.7 });
  });

  it('sends reasoning models no top_p or penalties; drops any of them, or reasoning_effort, for a model that refused it, and keeps logprobs', () => {
    const limits = new TokenLimits();
    const tuned = { messages, max_tokens: 10, top_p: 0.9, presence_penalty: 0.1, frequency_penalty: 0.2, logprobs: true };
    expect(limits.adapt({ model: 'gpt-5', ...tuned })).toEqual({ model: 'gpt-5', messages, max_completion_tokens: 10, logprobs: true });
    const unknown = limits.adapt({ model: 'acme-thinker', ...tuned, reasoning_effort: 'low' });
    expect(unknown).toEqual({ model: 'acme-thinker', ...tuned, reasoning_effort: 'low' });
    const refusal = (param: string) =>
      new UpstreamError('upstream_invalid_request', `Unsupported parameter: '${param}' is not supported with this model.`, { upstreamStatus: 400, upstreamCode: 'unsupported_parameter', param });
    const withoutTopP = limits.retryAfter(unknown, refusal('top_p'))!;
    expect(withoutTopP).not.toHaveProperty('top_p');
    expect(limits.retryAfter(withoutTopP, refusal('reasoning_effort'))).not.toHaveProperty('reasoning_effort');
    expect(limits.retryAfter(withoutTopP, refusal('logprobs'))).toBeNull();
    expect(limits.adapt({ model: 'acme-thinker', ...tuned, reasoning_effort: 'high' })).toEqual({ model: 'acme-thinker', ...tuned, top_p: undefined, reasoning_effort: undefined });
  });

  it('takes a refused top_p value as the field refused (dropped, retried), but a refused reasoning_effort value as the client\'s to fix', () => {
    const limits = new TokenLimits();
    const asked = limits.adapt({ model: 'acme-thinker', messages, max_tokens: 10, top_p: 0.9, reasoning_effort: 'minimal' });
    const refusedValue = (param: string) =>
      new UpstreamError('upstream_invalid_request', `Unsupported value: '${param}' does not support this value with this model.`, { upstreamStatus: 400, upstreamCode: 'unsupported_value', param });
    expect(limits.retryAfter(asked, refusedValue('top_p'))).not.toHaveProperty('top_p');
    expect(limits.retryAfter(asked, refusedValue('reasoning_effort'))).toBeNull();
    expect(limits.adapt({ model: 'acme-thinker', messages, reasoning_effort: 'high' })).toHaveProperty('reasoning_effort', 'high');
  });
});
