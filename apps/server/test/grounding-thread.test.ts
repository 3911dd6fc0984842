import { describe, expect, it } from 'vitest';
import { checkGrounding } from '@svc/grounding';
import { GroundingThread } from '../src/chat/grounding-thread.js';
import { createOfflineGrounder, INLINE_ANSWER_CHARS, INLINE_CJK_CHARS, INLINE_GROUNDING_CHARS } from '../src/chat/grounder.js';

// The thread runs the build's dist/grounding-worker.js (npm test builds first).
const thread = GroundingThread.beside(new URL('../dist/index.js', import.meta.url).href);

const DOC = 'The tower was finished in 1889 and is 330 metres tall. It stands in Paris. '.repeat(600);
const ANSWER = 'The tower was finished in 1889. It stands in Rome.';

/** The thread, counting the checks handed to it. */
function countingThread() {
  let checks = 0;
  const counting = Object.assign(Object.create(thread!) as GroundingThread, {
    check: (...args: Parameters<GroundingThread['check']>) => {
      checks += 1;
      return thread!.check(...args);
    },
  });
  return { counting, onThread: () => checks };
}

describe('grounding on a worker thread', () => {
  it('is found beside the build, and not beside the source (checks there stay inline)', () => {
    expect(thread).toBeDefined();
    expect(GroundingThread.beside(import.meta.url)).toBeUndefined();
  });

  it('gives exactly the inline result, for concurrent checks', async () => {
    const inputs = [0, 1, 2, 3].map((i) => ({ sources: [DOC, `Note ${i}.`], answer: `${ANSWER} Note ${i}.`, question: 'Where is it?' }));
    const results = await Promise.all(inputs.map((input) => thread!.check(input)));
    results.forEach((r, i) => expect(r).toEqual(checkGrounding(inputs[i]!)));
    expect(results[0]!.grounded).toBe(false);
  });

  it('is what the offline grounder uses past INLINE_GROUNDING_CHARS, with the same svc result', async () => {
    expect(DOC.length).toBeGreaterThan(INLINE_GROUNDING_CHARS);
    const messages = [{ role: 'system', content: DOC }, { role: 'user', content: 'Where is it?' }];
    const viaThread = await createOfflineGrounder({ thread }).check({ messages, answer: ANSWER, requested: true });
    const inline = await createOfflineGrounder({ thread: null }).check({ messages, answer: ANSWER, requested: true });
    expect(viaThread).toEqual(inline);
    expect(viaThread.claims?.[1]).toMatchObject({ text: 'It stands in Rome.', grounded: false });
  });

  it('checks at the threshold it is given, as inline', async () => {
    const input = { sources: [DOC], answer: 'The tower was completed in 1889 and is 330 metres high.', question: 'How tall is it?' };
    const inline = checkGrounding(input);
    const lower = Math.round((inline.score - 0.05) * 1000) / 1000;
    expect(inline.grounded).toBe(false);
    const viaThread = await thread!.check(input, lower);
    expect(viaThread).toEqual(checkGrounding(input, { threshold: lower }));
    expect(viaThread).toMatchObject({ score: inline.score, grounded: true, flaggedSpans: [] });
    expect(await thread!.check(input)).toEqual(inline);
  });

  it('takes a long answer to the thread even when its sources are short (its claims are what the check costs)', async () => {
    const { counting, onThread } = countingThread();
    const grounder = createOfflineGrounder({ thread: counting });
    const messages = [{ role: 'system', content: 'The tower was finished in 1889 and is 330 metres tall. It stands in Paris.' }, { role: 'user', content: 'Tell me about it.' }];
    const long = 'The tower was finished in 1889. It stands in Paris. '.repeat(60);
    expect(long.length).toBeGreaterThan(INLINE_ANSWER_CHARS);
    const viaThread = await grounder.check({ messages, answer: long, requested: true });
    expect(onThread()).toBe(1);
    expect(viaThread).toEqual(await createOfflineGrounder({ thread: null }).check({ messages, answer: long, requested: true }));
    await grounder.check({ messages, answer: 'The tower stands in Paris.', requested: true });
    expect(onThread()).toBe(1);
  });

  it('takes Chinese or Japanese sources to the thread from a few thousand characters (word segmentation costs ~1 µs a character)', async () => {
    const { counting, onThread } = countingThread();
    const grounder = createOfflineGrounder({ thread: counting });
    const zh = '上海是中国最大的城市，人口超过两千万。北京是中国的首都，有很多历史古迹。'.repeat(100);
    expect(zh.length).toBeGreaterThan(INLINE_CJK_CHARS);
    expect(zh.length).toBeLessThan(INLINE_GROUNDING_CHARS);
    const messages = [{ role: 'system', content: zh }, { role: 'user', content: '中国最大的城市是哪里？' }];
    const answer = '北京是中国最大的城市。';
    const viaThread = await grounder.check({ messages, answer, requested: true });
    expect(onThread()).toBe(1);
    expect(viaThread).toEqual(await createOfflineGrounder({ thread: null }).check({ messages, answer, requested: true }));
    // English of the same size stays inline.
    await grounder.check({ messages: [{ role: 'system', content: DOC.slice(0, zh.length) }, { role: 'user', content: 'Where is it?' }], answer: ANSWER, requested: true });
    expect(onThread()).toBe(1);
  });
});
