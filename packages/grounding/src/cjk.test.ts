import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD } from './index.js';
import { tokenize } from './tokenize.js';

// Chinese and Japanese are cut into words (Intl.Segmenter), so a changed place name or number in an otherwise
// copied sentence is flagged while the copy itself passes.

const SEED = Number(process.env.GROUNDING_PROPS_SEED ?? 20261129);
const RUNS = Number(process.env.GROUNDING_PROPS_RUNS ?? 1);
const runs = (numRuns: number) => ({ seed: SEED, numRuns: Math.max(1, Math.round(numRuns * RUNS)) });

const ZH_PLACES = ['上海', '北京', '广州', '深圳', '杭州', '南京', '成都', '武汉'];
const JA_PLACES = ['東京', '大阪', '京都', '福岡', '札幌', '名古屋', '横浜', '神戸'];

/** Sentences with a place `{}` in them, and the pool its place is drawn from. */
const TEMPLATES: readonly [template: string, places: readonly string[]][] = [
  ['2024年3月，公司在{}开设了新的研发中心，员工约有300人。', ZH_PLACES],
  ['{}是中国最大的城市之一，人口超过两千万。', ZH_PLACES],
  ['会议将于明年五月在{}举行，预计有500名代表参加。', ZH_PLACES],
  ['トヨタは2023年に{}で新しい工場を開設しました。', JA_PLACES],
  ['本社は{}にあり、従業員は約1400人です。', JA_PLACES],
  ['次の大会は{}で開催される予定です。', JA_PLACES],
];

const OTHERS = [
  '该中心主要研究人工智能和自动驾驶技术。',
  '新工場では電気自動車の部品を生産しています。',
  'The Eiffel Tower was completed in March 1889 and stands 330 metres tall in Paris.',
];

describe('Chinese and Japanese', () => {
  it('a run of Chinese is read as words, not as one', () => {
    const text = '公司在上海开设了新的研发中心';
    const words = tokenize(text).map((t) => text.slice(t.start, t.end));
    expect(words).toContain('上海');
    expect(words.join('')).toBe(text);
  });

  // Runs of Han and kana, each cut by ICU alone: a text of them joined by punctuation, digits or line breaks is
  // read as each of them is read alone, however often one comes back.
  const RUNS = ['公司在上海开设了新的研发中心', '员工约有', '该中心不再研究自动驾驶技术', '人口超过两千万', '新しい工場を開設しました', '本社は東京にあり', '従業員は約'];
  const SEPARATORS = ['，', '。', '\n', '2024', '、'];
  const wordsOf = (text: string) => tokenize(text).map((t) => text.slice(t.start, t.end));

  it('property: runs joined, repeated or not, are cut as each is alone', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom(...RUNS), fc.constantFrom(...SEPARATORS)), { minLength: 1, maxLength: 30 }), (parts) => {
        const text = parts.map(([run, sep]) => run + sep).join('');
        const alone = parts.flatMap(([run, sep]) => [...wordsOf(run), ...wordsOf(sep)]);
        expect(wordsOf(text)).toEqual(alone);
      }),
      runs(100),
    );
  });

  it('property: among sentences that share their particles, a copied one is its own evidence, and removing a source never raises the score', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...TEMPLATES), fc.nat()), { minLength: 2, maxLength: 12 }),
        fc.nat(),
        fc.nat(),
        (drawn, pick, drop) => {
          const sentences = drawn.map(([[template, places], a]) => template.replace('{}', places[a % places.length]!));
          const all = [sentences.join(''), ...OTHERS];
          const copied = sentences[pick % sentences.length]!;
          const r = checkGrounding({ sources: all, answer: copied });
          expect(r.grounded).toBe(true);
          for (const c of r.claims) expect(copied).toContain(c.evidence!.text);
          // The same sentence with its place moved on: removing a source never raises its score.
          const [[template, places], a] = drawn[pick % drawn.length]!;
          const moved = template.replace('{}', places[(a + 1) % places.length]!);
          const fewer = all.filter((_, i) => i !== drop % all.length);
          expect(checkGrounding({ sources: fewer, answer: moved }).score).toBeLessThanOrEqual(checkGrounding({ sources: all, answer: moved }).score);
        },
      ),
      runs(60),
    );
  });

  const rows: { name: string; source: string; answer: string; grounded: boolean; flagged?: string }[] = [
    { name: 'a Chinese sentence copied', source: '上海是中国最大的城市，人口超过两千万。', answer: '上海是中国最大的城市，人口超过两千万。', grounded: true },
    { name: 'a Chinese place changed (北京 for 上海)', source: '上海是中国最大的城市，人口超过两千万。', answer: '北京是中国最大的城市，人口超过两千万。', grounded: false, flagged: '北京' },
    { name: 'a Chinese place changed mid-sentence', source: '2024年3月，公司在上海开设了新的研发中心，员工约有300人。', answer: '2024年3月，公司在北京开设了新的研发中心，员工约有300人。', grounded: false, flagged: '北京' },
    { name: 'a number changed in Chinese', source: '2024年3月，公司在上海开设了新的研发中心，员工约有300人。', answer: '2024年3月，公司在上海开设了新的研发中心，员工约有500人。', grounded: false, flagged: '500' },
    { name: 'part of a Chinese sentence copied', source: '2024年3月，公司在上海开设了新的研发中心，员工约有300人。', answer: '公司在上海开设了新的研发中心。', grounded: true },
    { name: 'a Japanese sentence copied', source: 'トヨタは2023年に東京で新しい工場を開設しました。', answer: 'トヨタは2023年に東京で新しい工場を開設しました。', grounded: true },
    { name: 'a Japanese place changed (大阪 for 東京)', source: 'トヨタは2023年に東京で新しい工場を開設しました。', answer: 'トヨタは2023年に大阪で新しい工場を開設しました。', grounded: false, flagged: '大阪' },
    { name: 'a Japanese company changed (ホンダ for トヨタ)', source: 'トヨタは2023年に東京で新しい工場を開設しました。', answer: 'ホンダは2023年に東京で新しい工場を開設しました。', grounded: false, flagged: 'ホンダ' },
    { name: 'a Japanese capital changed', source: '東京は日本の首都で、人口は約1400万人です。', answer: '大阪は日本の首都で、人口は約1400万人です。', grounded: false, flagged: '大阪' },
    { name: 'a label in Chinese or Japanese before a copied sentence is no claim', source: 'It is 24 °C and sunny in Paris.', answer: '東京: It is 24 °C and sunny in Paris.', grounded: true },
  ];

  it.each(rows)('$name', ({ source, answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(grounded);
    if (flagged) expect(r.flaggedSpans.map((s) => s.text)).toContain(flagged);
    else expect(r.flaggedSpans).toEqual([]);
  });

  it('property: a copied sentence is grounded and the same sentence with another place is flagged, among other sources', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...TEMPLATES),
        fc.nat(),
        fc.nat(),
        fc.subarray([...OTHERS]),
        fc.nat(),
        ([template, places], a, b, others, at) => {
          const place = places[a % places.length]!;
          const other = places[(a + 1 + (b % (places.length - 1))) % places.length]!;
          const source = template.replace('{}', place);
          const sources = [...others];
          sources.splice(at % (sources.length + 1), 0, source);
          expect(checkGrounding({ sources, answer: source }).grounded).toBe(true);
          const r = checkGrounding({ sources, answer: template.replace('{}', other) });
          expect(r.score).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
          expect(r.flaggedSpans.map((s) => s.text)).toContain(other);
        },
      ),
      runs(200),
    );
  });
});

// Korean puts spaces between words but glues particles and endings to them ("서울은", "평택에서", "2023년에"): a word
// is read without them, so the same noun with another particle is the same word.
describe('Korean', () => {
  const SOURCE = '삼성전자는 2023년에 평택에서 새 반도체 공장을 열었으며, 직원은 약 1,200명입니다.';
  const rows: { name: string; answer: string; grounded: boolean; flagged?: string }[] = [
    { name: 'a Korean sentence copied', answer: SOURCE, grounded: true },
    { name: 'part of it copied', answer: '삼성전자는 2023년에 평택에서 새 반도체 공장을 열었다.', grounded: true },
    { name: 'the same nouns with other particles', answer: '삼성전자가 2023년 평택에 새 반도체 공장을 열었으며, 직원이 약 1,200명이다.', grounded: true },
    { name: 'a number changed', answer: '삼성전자는 2021년에 평택에서 새 반도체 공장을 열었으며, 직원은 약 1,200명입니다.', grounded: false, flagged: '2021' },
    { name: 'a staff count changed', answer: '삼성전자는 2023년에 평택에서 새 반도체 공장을 열었으며, 직원은 약 3,400명입니다.', grounded: false, flagged: '3,400' },
    { name: 'an opener before the copy', answer: `네. ${SOURCE}`, grounded: true },
  ];

  it.each(rows)('$name', ({ answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [SOURCE, OTHERS[2]!], answer });
    expect(r.grounded).toBe(grounded);
    if (flagged) expect(r.flaggedSpans.map((s) => s.text)).toContain(flagged);
    if (!grounded) expect(r.score).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
  });

  it('property: a noun is one word whatever particle it carries, so a copy with the particles changed stays grounded', () => {
    const NOUNS = ['서울', '회사', '대학교', '박물관', '전문가', '고양이', '효과', '정부', '지하', '나이', '국가', '회의', '도시'];
    const PARTICLES = ['은', '는', '이', '가', '을', '를', '에', '에서', '의', '도', '으로', '까지', '부터', ''];
    fc.assert(
      fc.property(fc.constantFrom(...NOUNS), fc.constantFrom(...PARTICLES), fc.constantFrom(...PARTICLES), (noun, a, b) => {
        const [x] = tokenize(`${noun}${a}`);
        const [y] = tokenize(`${noun}${b}`);
        expect(x!.word.stem).toBe(y!.word.stem);
        const source = `${noun}${a} 2019년부터 연구 예산을 늘렸다.`;
        expect(checkGrounding({ sources: [source], answer: `${noun}${b} 2019년부터 연구 예산을 늘렸다.` }).grounded).toBe(true);
      }),
      runs(100),
    );
  });
});

describe('a sentence in another script after one with no end mark, or with its own', () => {
  const source = 'この店は毎週月曜日が定休日です。 The laptop costs €1,299.99 and weighs 1.4 kg.';
  const japanese = '象は空を飛ぶ。';

  it.each([
    // An English line with no full stop, then a Japanese sentence: two claims, not one whose Japanese half is read
    // against the Japanese of the source.
    'Our office is open from Monday to Friday',
    // The danda ends a Hindi sentence as a full stop does.
    'कंपनी की स्थापना 2010 में दिल्ली में हुई थी।',
  ])('appending %s + a Japanese sentence the sources lack adds a claim and never raises the score', (first) => {
    const alone = checkGrounding({ sources: [source], answer: first });
    const both = checkGrounding({ sources: [source], answer: `${first} ${japanese}` });
    expect(both.claims.map((c) => c.text)).toEqual([...alone.claims.map((c) => c.text), japanese]);
    expect(both.score).toBeLessThanOrEqual(alone.score);
  });

  it.each(['The word 象 means elephant.', '我们使用 Python 编写程序。', '東京タワーは高さ333 mで、1.5倍です。'])('%s stays one claim', (answer) => {
    expect(checkGrounding({ sources: [source], answer }).claims).toHaveLength(1);
  });
});

describe('Thai, Lao, Khmer and Burmese, written without spaces between words', () => {
  it('a run is read as words, as Chinese is', () => {
    const text = 'กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย';
    const words = tokenize(text).map((t) => text.slice(t.start, t.end));
    expect(words).toEqual(expect.arrayContaining(['กรุงเทพมหานคร', 'ประเทศไทย']));
    expect(words.join('')).toBe(text);
  });

  const source = 'กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย มีประชากร 10 ล้านคน';
  it.each([
    // Words of the source joined otherwise than it joins them: a run of its words, not a run it lacks.
    { answer: 'กรุงเทพมหานครมีประชากร 10 ล้านคน', grounded: true },
    { answer: 'ประเทศไทยมีประชากร 10 ล้านคน', grounded: true },
    { answer: 'กรุงเทพมหานครมีประชากร 12 ล้านคน', grounded: false },
  ])('$answer', ({ answer, grounded }) => {
    expect(checkGrounding({ sources: [source], answer }).grounded).toBe(grounded);
  });
});
