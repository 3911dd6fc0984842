import { describe, expect, it } from 'vitest';
import { withThinkingSwitch } from '../../../src/upstream/hybrid-thinking.js';

const messages = [{ role: 'user', content: 'Hi' }];

describe('withThinkingSwitch', () => {
  it('switches the hybrids by name, behind a prefix or an Ollama tag; leaves models that only answer or only think', () => {
    for (const model of ['Qwen/Qwen3-8B', 'Qwen3-30B-A3B', 'qwen3:8b', 'qwen3:latest', 'qwen3.5:4b', 'openrouter/qwen/qwen3-32b', 'zai-org/GLM-4.5-Air', 'glm-4.6']) {
      expect(withThinkingSwitch({ model, messages }, false).chat_template_kwargs, model).toEqual({ enable_thinking: false });
    }
    expect(withThinkingSwitch({ model: 'deepseek-ai/DeepSeek-V3.1', messages }, true).chat_template_kwargs).toEqual({ thinking: true });
    expect(withThinkingSwitch({ model: 'DeepSeek-V3.2-Exp', messages }, false).chat_template_kwargs).toEqual({ thinking: false });
    for (const model of [
      'Qwen/Qwen3-30B-A3B-Instruct-2507',
      'Qwen/Qwen3-30B-A3B-Thinking-2507',
      'qwen3:4b-thinking-2507-q4_K_M',
      'Qwen/Qwen3-Coder-30B-A3B-Instruct',
      'Qwen/Qwen3-Embedding-8B',
      'Qwen/Qwen2.5-7B-Instruct',
      'deepseek-ai/DeepSeek-V3',
      'deepseek-ai/DeepSeek-V3.10',
      'deepseek-r1:14b',
      'gpt-4o-mini',
      'o4-mini',
      'llama3.1',
    ]) {
      const body = { model, messages };
      expect(withThinkingSwitch(body, false), model).toBe(body);
    }
  });

  it('switches on for svc.thinking only (an effort set for both modes does not turn it on); the client’s own kwargs win', () => {
    const sent = (body: Record<string, unknown>, thinking = false) => withThinkingSwitch({ model: 'Qwen/Qwen3-8B', messages, ...body }, thinking);
    expect(sent({}, true).chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(sent({ reasoning_effort: 'high' })).toMatchObject({ chat_template_kwargs: { enable_thinking: false }, reasoning_effort: 'high' });
    expect(sent({ reasoning_effort: 'high' }, true)).toMatchObject({ chat_template_kwargs: { enable_thinking: true }, reasoning_effort: 'high' });
    expect(sent({ chat_template_kwargs: { enable_thinking: true, custom: 1 } }).chat_template_kwargs).toEqual({ enable_thinking: true, custom: 1 });
    expect(sent({ chat_template_kwargs: { custom: 1 } }).chat_template_kwargs).toEqual({ enable_thinking: false, custom: 1 });
  });

  it('sends Ollama (a :tag) reasoning_effort "none" while thinking is off, whatever effort the app set; the effort as sent while on', () => {
    expect(withThinkingSwitch({ model: 'qwen3:8b', messages }, false).reasoning_effort).toBe('none');
    expect(withThinkingSwitch({ model: 'qwen3:8b', messages, reasoning_effort: 'low' }, false).reasoning_effort).toBe('none');
    expect(withThinkingSwitch({ model: 'qwen3:8b', messages }, true)).not.toHaveProperty('reasoning_effort');
    expect(withThinkingSwitch({ model: 'qwen3:8b', messages, reasoning_effort: 'low' }, true).reasoning_effort).toBe('low');
    expect(withThinkingSwitch({ model: 'Qwen/Qwen3-8B', messages }, false)).not.toHaveProperty('reasoning_effort');
  });
});
