import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD, type GroundingResult } from './index.js';

// Hundreds of generated checks a test: seconds on a loaded CI host, so more than vitest's default 5 s to finish.
vi.setConfig({ testTimeout: 60_000 });

const KINDS: Record<string, string[]> = {
  numbers: [
    'The laptop costs €1,299.99 and weighs 1.4 kg.',
    'Revenue grew 12.5% to $3.2bn in fiscal 2023.',
    'The bridge spans 1.2–1.5 km across the bay.',
    'Temperatures ranged from -5°C to 12°C last week.',
    'The tablet has a 10.9-inch screen and 256 GB of storage.',
    'Tickets cost £45 for adults and £20 for children under 12.',
    'The engine delivers 150 hp at 5,500 rpm.',
    'About 3/4 of respondents said they sleep 6-8 hours a night.',
    'The loan carries an interest rate of 4.25% per year over 30 years.',
    'The dam holds 39 billion m³ of water.',
  ],
  dates: [
    'The contract was signed on 2021-03-15 in Geneva.',
    'The store reopened on 03/04/2022 after the renovation.',
    'The festival runs from 12 to 15 July 2024 in Lyon.',
    'Payment is due by Jan. 31, 2025 at the latest.',
    'The office was closed on Monday, 4 September 2023.',
    'The treaty entered into force on 1st January 1995.',
    'The survey was carried out in Q2 2023 across 14 countries.',
  ],
  web: [
    'Support requests go to help@example.com within two business days.',
    'The full report is at https://example.org/reports/2023-annual.pdf for download.',
    'The configuration lives in /etc/nginx/nginx.conf on the server.',
    'Run npm install in the project folder before starting the app.',
    'The settings file is C:\\Users\\Public\\config.ini on Windows machines.',
    'The API returns a 404 error when the user ID does not exist.',
  ],
  quotes: [
    'The minister said, "We will not raise taxes this year."',
    "According to the coach, 'the team played its best match of the season.'",
    'The author (a former nurse) wrote the novel in six weeks.',
    'The museum, which opened in 1902, houses over 40,000 objects.',
    'The ship — built in Belfast — sank on its maiden voyage.',
    'The company (founded by two students) now employs 800 people.',
  ],
  abbreviations: [
    'Dr. Smith joined the clinic in 2015 as head of cardiology.',
    'The U.S. Navy operates 11 aircraft carriers.',
    'Prof. Müller teaches at the Univ. of Vienna, i.e. the oldest university in the German-speaking world.',
    'The company moved its HQ to St. Louis, Mo. in 1998.',
    'Mr. and Mrs. Patel run a bakery on Main St. near the station.',
    'The package weighs approx. 2 lbs. and ships in 3 days.',
    'The U.K. and the E.U. signed the agreement on Dec. 24, 2020.',
    'Sen. Warren introduced the bill, e.g. to cap drug prices.',
  ],
  long: [
    'The committee, which had been meeting every Tuesday since the spring of 2019 in the old council chamber on the second floor of the town hall, finally agreed after many hours of debate and several rounds of public consultation that the new library would be built on the site of the former bus depot, that it would have three floors and a rooftop garden, and that construction would begin no later than the autumn of 2025 provided that the regional government confirmed its share of the funding.',
    'Researchers at the university followed 2,400 patients for ten years and found that those who walked at least thirty minutes a day had a lower risk of heart disease, fewer hospital stays and better sleep than those who did not, although the authors cautioned that the study was observational and could not prove that walking itself caused the difference.',
  ],
  unpunctuated: [
    'The train to Bristol leaves from platform 4 at 9:15',
    'Our office is open from Monday to Friday',
    'The warranty covers parts and labour for two years',
    'Marta Lopez won the regional chess title in 2018',
  ],
  german: [
    'Die Stadtbibliothek in Freiburg hat montags geschlossen.',
    'Der Zug nach München fährt um 14:30 Uhr von Gleis 7 ab.',
    'Das Unternehmen wurde 1987 in Stuttgart gegründet und beschäftigt 1.200 Mitarbeiter.',
    'Die Brücke ist nicht für Lastwagen über 7,5 Tonnen zugelassen.',
  ],
  french: [
    "La tour Eiffel a été achevée en 1889 pour l'Exposition universelle.",
    "Le musée est fermé le mardi et ouvre à 9 h les autres jours.",
    "L'entreprise a réalisé un chiffre d'affaires de 2,5 millions d'euros en 2022.",
    "Le médecin n'a pas prescrit d'antibiotiques à Mme Dubois.",
  ],
  spanish: [
    'El museo del Prado abrió sus puertas en 1819 en Madrid.',
    'La empresa no ofrece envíos gratuitos a las islas Canarias.',
    'El río Ebro tiene una longitud de 930 kilómetros.',
    '¿Sabías que el mercado abre a las 8 de la mañana?',
  ],
  cjk: [
    '東京タワーは1958年に完成しました。',
    '北京是中国的首都，人口超过2000万。',
    '서울의 지하철은 1974년에 개통되었다.',
    'この店は毎週月曜日が定休日です。',
  ],
  // Other scripts, and numbers in a script's own digits.
  scripts: [
    'Компания была основана в Москве в 2010 году и насчитывает 500 сотрудников.',
    'कंपनी की स्थापना 2010 में दिल्ली में हुई थी।',
    'تأسست الشركة في دبي عام 2010 ويعمل بها 500 موظف.',
    'تأسست الشركة في دبي عام ٢٠١٠ ويعمل بها ٥٠٠ موظف.',
    'कंपनी में ४५० कर्मचारी काम करते हैं।',
    'トヨタは２０２３年に東京で新しい工場を開設しました。',
    'Ο Παρθενώνας ολοκληρώθηκε το 432 π.Χ. στην Αθήνα.',
  ],
  // Scripts written without spaces between words, and without capitals to tell a name.
  thai: [
    'กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย',
    'บริษัทก่อตั้งขึ้นในปี 2010 และมีพนักงาน 500 คน',
    'ร้านเปิดทุกวันตั้งแต่ 9 โมงเช้าถึง 5 โมงเย็น',
    'สะพานนี้ยาว ๑๒๐ เมตร',
  ],
  // Several scripts in one sentence, and sentences of several scripts side by side.
  mixed: [
    'The Tokyo office (東京本社) opened in 2019 with 120 staff.',
    'Наш офис в Berlin открылся в 2021 году.',
    'The app is called 微信 in China and WeChat elsewhere.',
    'कंपनी का मुख्यालय Mumbai में है। इसकी स्थापना 1998 में हुई थी।',
    'Samsung은 1938년에 대구에서 설립되었다.',
  ],
  urls: [
    'The docs at https://docs.example.com/v2/setup?lang=en explain the setup in 5 steps.',
    'Download the installer from www.example.org/files before 5 May 2024.',
    'See https://example.com/a_(b) for the 3 known issues.',
  ],
  ranges: [
    'The trail is 12–15 km long and climbs 800 m.',
    'Doses of 5-10 mg are given every 6 hours.',
    'The battery lasts 8 to 10 hours at 20 °C.',
    'Prices range from $5 to $12.50 per person.',
    'The hall seats 1,200–1,500 people, i.e. about 40% more than before.',
    'Speeds of 90 km/h are allowed between 22:00 and 06:00.',
  ],
  emoji: [
    'The café 🍰 serves vegan cakes every weekend.',
    'Our team won the hackathon 🎉 with a recycling app.',
    '🚆 Trains to Zurich run every 30 minutes.',
  ],
};

const ALL = Object.entries(KINDS).flatMap(([kind, ss]) => ss.map((s) => ({ kind, s })));
const sentence = fc.constantFrom(...ALL.map((x) => x.s));

const SEED = Number(process.env.GROUNDING_PROPS_SEED ?? 20261129);
const RUNS = Number(process.env.GROUNDING_PROPS_RUNS ?? 1);
const runs = (numRuns: number) => ({ seed: SEED, numRuns: Math.max(1, Math.round(numRuns * RUNS)) });

const OPENERS = ['', 'Yeah. ', 'Sure, ', 'Good question! '];
const describeClaims = (r: GroundingResult) => JSON.stringify(r.claims.map((c) => [c.text, c.score]));

const copyCase = fc.record({
  copied: fc.uniqueArray(sentence, { minLength: 1, maxLength: 3 }),
  others: fc.array(sentence, { maxLength: 6 }),
  perMessage: fc.boolean(),
  repeat: fc.nat(2),
});

function sourcesOf({ copied, others, perMessage, repeat }: { copied: string[]; others: string[]; perMessage: boolean; repeat: number }) {
  const all = [...copied, ...others];
  const sources = perMessage ? all : [all.join(' ')];
  for (let i = 0; i < repeat; i++) sources.push(sources[0]!);
  return sources;
}

const LAYOUTS: Array<{ name: string; lay: (c: readonly string[]) => string }> = [
  { name: 'plain', lay: (c) => c.join(' ') },
  { name: 'newlines', lay: (c) => c.join('\n') },
  { name: 'bullets', lay: (c) => c.map((s) => `- ${s}`).join('\n') },
  { name: 'numbered', lay: (c) => c.map((s, i) => `${i + 1}. ${s}`).join('\n') },
  { name: 'heading', lay: (c) => `# Summary\n\n${c.join(' ')}` },
  { name: 'bold', lay: (c) => c.map((s) => `**${s}**`).join(' ') },
  { name: 'table', lay: (c) => `| Fact |\n|---|\n${c.map((s) => `| ${s} |`).join('\n')}` },
  { name: 'quote', lay: (c) => c.map((s) => `> ${s}`).join('\n') },
  { name: 'nested bullets', lay: (c) => `- Facts\n${c.map((s) => `  - ${s}`).join('\n')}` },
  { name: 'labelled items', lay: (c) => c.map((s, i) => `${i + 1}. **Point ${i + 1}:** ${s}`).join('\n') },
  { name: 'two-column table', lay: (c) => `| # | Fact |\n|---|---|\n${c.map((s, i) => `| ${i + 1} | ${s} |`).join('\n')}` },
];


/**
 * `s` with one of its numbers (the `pick`-th, outside links) changed to one no source has. Skips (fc.pre) a
 * question, which claims nothing whatever its number, and a sentence with no number to change.
 */
function withChangedNumber(s: string, sources: string[], pick: number): string {
  fc.pre(!s.endsWith('?'));
  // A link's digits are not read (links are blanked), so only numbers outside one; in any script's digits.
  const nums = [...s.replace(/https?:\S+/g, (u) => 'x'.repeat(u.length)).matchAll(/\p{Nd}+/gu)];
  fc.pre(nums.length > 0);
  const m = nums[pick % nums.length]!;
  const zero = DIGIT_ZEROS.find((z) => m[0].codePointAt(0)! - z >= 0 && m[0].codePointAt(0)! - z <= 9)!;
  const ascii = [...m[0]].map((c) => String(c.codePointAt(0)! - zero)).join('');
  const repl = [...`${Number(ascii) + 7}3`].map((d) => String.fromCodePoint(zero + Number(d))).join('');
  fc.pre(!sources.join(' ').includes(repl));
  return s.slice(0, m.index) + repl + s.slice(m.index! + m[0].length);
}

/** The digit zero of ASCII, Arabic-Indic, Devanagari, Thai and full-width digits. */
const DIGIT_ZEROS = [0x30, 0x660, 0x966, 0xe50, 0xff10];

describe('copy is grounded, text of every kind', () => {
  it('copied sentences of any kind, any layout, opener', () => {
    fc.assert(
      fc.property(copyCase, fc.constantFrom(...LAYOUTS), fc.constantFrom(...OPENERS), (c, layout, opener) => {
        const sources = sourcesOf(c);
        // Markup starts its own line after an opener ("Sure!\n\n| Fact |").
        const laid = layout.lay(c.copied);
        const answer = opener && /^[-#|>*\d]/.test(laid) ? `${opener.trim()}\n\n${laid}` : opener + laid;
        const r = checkGrounding({ sources, answer });
        expect(r.grounded, `${layout.name} ${JSON.stringify(answer)}: ${describeClaims(r)}`).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
      }),
      { ...runs(400) },
    );
  });

  it('quoting with different whitespace, case and smart quotes', () => {
    const variants: Array<(s: string) => string> = [
      (s) => s.replace(/ /g, '  '),
      (s) => s.replace(/ /g, '\u00a0'),
      (s) => s.replace(/"([^"]*)"/g, '\u201c$1\u201d').replace(/'/g, '\u2019'),
      (s) => s.toLowerCase(),
      (s) => s.toUpperCase(),
      (s) => s.replace(/\u2019/g, "'"),
    ];
    fc.assert(
      fc.property(copyCase, fc.constantFrom(...variants.map((v, i) => ({ v, i }))), (c, { v, i }) => {
        const sources = sourcesOf(c);
        const answer = c.copied.map(v).join(' ');
        const r = checkGrounding({ sources, answer });
        expect(r.grounded, `variant ${i} ${JSON.stringify(answer)}: ${describeClaims(r)}`).toBe(true);
      }),
      runs(400),
    );
  });
});

describe('tables whose first column counts the rows', () => {
  it('the row numbers are no claim', () => {
    fc.assert(
      fc.property(copyCase, fc.constantFrom('#', 'No.', 'Nr.', ''), fc.constantFrom('|---|---|', '|:--|:--|', '| --- | --- |'), fc.boolean(), (c, head, rule, dotted) => {
        const rows = c.copied.map((s, i) => `| ${i + 1}${dotted ? '.' : ''} | ${s} |`);
        const answer = `| ${head} | Fact |\n${rule}\n${rows.join('\n')}`;
        const r = checkGrounding({ sources: sourcesOf(c), answer });
        expect(r.grounded, `${JSON.stringify(answer)}: ${describeClaims(r)}`).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
      }),
      runs(200),
    );
  });
});

describe('evidence of every kind', () => {
  it("a copied sentence's evidence points into a source that contains it", () => {
    fc.assert(
      fc.property(copyCase, (c) => {
        const sources = sourcesOf(c);
        const s = c.copied[0]!;
        const r = checkGrounding({ sources, answer: s });
        for (const cl of r.claims) {
          const e = cl.evidence;
          expect(e, describeClaims(r)).not.toBeNull();
          expect(e!.text).toBe(sources[e!.source]!.slice(e!.start, e!.end));
          expect(e!.text, JSON.stringify(r.claims)).toContain(cl.text);
        }
      }),
      runs(300),
    );
  });
});

describe('spans of every kind', () => {
  it('non-overlapping, reason and score', () => {
    fc.assert(
      fc.property(copyCase, fc.array(sentence, { minLength: 1, maxLength: 4 }), fc.constantFrom(...LAYOUTS), (c, ans, layout) => {
        const answer = layout.lay(ans);
        const r = checkGrounding({ sources: sourcesOf(c), answer });
        let prev = 0;
        for (const s of r.flaggedSpans) {
          expect(s.start).toBeGreaterThanOrEqual(prev);
          expect(s.text).toBe(answer.slice(s.start, s.end));
          expect(s.reason.length).toBeGreaterThan(0);
          expect(s.score).toBeGreaterThanOrEqual(0);
          expect(s.score).toBeLessThanOrEqual(1);
          prev = s.end;
        }
      }),
      runs(300),
    );
  });
});

describe('monotone, text of every kind', () => {
  it('appending an unsupported sentence never raises the score', () => {
    const junk = fc.constantFrom('Otters juggle turquoise saxophones.', 'Quokkas whistle velvet marmalade', 'Die Zeppeline tanzen im Kaleidoskop.', '象は空を飛ぶ。');
    fc.assert(
      fc.property(copyCase, fc.array(sentence, { maxLength: 3 }), junk, fc.constantFrom(...LAYOUTS), (c, extra, j, layout) => {
        const sources = sourcesOf(c);
        const base = [...c.copied, ...extra];
        const a = checkGrounding({ sources, answer: layout.lay(base) }).score;
        const b = checkGrounding({ sources, answer: layout.lay([...base, j]) }).score;
        expect(b).toBeLessThanOrEqual(a);
      }),
      runs(300),
    );
  });

  it('removing a source never raises the score', () => {
    fc.assert(
      fc.property(copyCase, fc.array(sentence, { maxLength: 3 }), fc.nat(), (c, extra, k) => {
        const sources = [...c.copied, ...c.others];
        fc.pre(sources.length >= 2);
        const answer = [...c.copied, ...extra].join(' ');
        const fewer = sources.filter((_, i) => i !== k % sources.length);
        const after = checkGrounding({ sources: fewer, answer });
        // Sources that are only questions state nothing: the answer is then not checked (score 1 by definition).
        fc.pre(after.checked);
        expect(after.score).toBeLessThanOrEqual(checkGrounding({ sources, answer }).score);
      }),
      runs(300),
    );
  });

  it('replacing a number lowers the score', () => {
    fc.assert(
      fc.property(copyCase, fc.nat(), (c, pick) => {
        const sources = sourcesOf(c);
        const s = c.copied[0]!;
        const changed = withChangedNumber(s, sources, pick);
        const a = checkGrounding({ sources, answer: s }).score;
        const b = checkGrounding({ sources, answer: changed }).score;
        expect(b, `${changed}`).toBeLessThan(a);
      }),
      runs(300),
    );
  });

  it('replacing a name lowers the score', () => {
    fc.assert(
      fc.property(copyCase, fc.nat(), (c, pick) => {
        const sources = sourcesOf(c);
        const s = c.copied[0]!;
        const names = [...s.matchAll(/(?<=[\p{L}\p{N},] )\p{Lu}\p{Ll}{2,}/gu)];
        fc.pre(names.length > 0);
        const m = names[pick % names.length]!;
        const changed = s.slice(0, m.index) + 'Valdoria' + s.slice(m.index! + m[0].length);
        const a = checkGrounding({ sources, answer: s }).score;
        const b = checkGrounding({ sources, answer: changed }).score;
        expect(b, `${changed}`).toBeLessThan(a);
      }),
      runs(300),
    );
  });

  it('replacing a name in a script without capitals lowers the score', () => {
    // A place `{}` in sentences of scripts that have no capitals to tell a name, and places of the same script.
    const templates: [string, string[]][] = [
      ['{}เป็นเมืองหลวงของประเทศไทย', ['กรุงเทพมหานคร', 'เชียงใหม่', 'ภูเก็ต']],
      ['บริษัทก่อตั้งขึ้นที่{}ในปี 2010', ['กรุงเทพมหานคร', 'เชียงใหม่', 'ขอนแก่น']],
      ['कंपनी की स्थापना 2010 में {} में हुई थी।', ['दिल्ली', 'मुंबई', 'पुणे']],
      ['تأسست الشركة في {} عام 2010.', ['دبي', 'القاهرة', 'عمان']],
      ['서울의 지하철은 1974년에 {}에서 개통되었다.', ['서울', '부산', '대구']],
      ['公司总部位于{}，员工约有300人。', ['上海', '北京', '深圳']],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...templates), fc.nat(), fc.nat(), fc.array(sentence, { maxLength: 4 }), ([template, places], a, b, others) => {
        const here = places[a % places.length]!;
        const other = places[(a + 1 + (b % (places.length - 1))) % places.length]!;
        const s = template.replace('{}', here);
        const sources = [[s, ...others].join(' ')];
        fc.pre(!sources[0]!.includes(other));
        const before = checkGrounding({ sources, answer: s }).score;
        const after = checkGrounding({ sources, answer: template.replace('{}', other) }).score;
        expect(after, `${other} for ${here}`).toBeLessThan(before);
      }),
      runs(200),
    );
  });

  it('negating lowers the score', () => {
    fc.assert(
      fc.property(copyCase, (c) => {
        const sources = sourcesOf(c);
        const s = c.copied[0]!;
        const m = / (is|was|are|were|will|can|has|have) /.exec(s);
        fc.pre(m !== null && !/\bnot\b|n't/.test(s));
        const changed = s.slice(0, m!.index + m![0].length) + 'not ' + s.slice(m!.index + m![0].length);
        const a = checkGrounding({ sources, answer: s }).score;
        const b = checkGrounding({ sources, answer: changed }).score;
        expect(b, `${changed}`).toBeLessThan(a);
      }),
      runs(300),
    );
  });
});

describe('markdown emphasis ends no sentence early and joins none', () => {
  it('each bolded or italic sentence is a claim of its own', () => {
    fc.assert(
      fc.property(fc.uniqueArray(sentence.filter((s) => /[.!]$/.test(s) && !/[*_]|\. /.test(s)), { minLength: 2, maxLength: 3 }), fc.constantFrom('**', '_', '*'), (copied, mark) => {
        const answer = copied.map((s) => `${mark}${s}${mark}`).join(' ');
        const r = checkGrounding({ sources: copied, answer });
        expect(r.claims.length, describeClaims(r)).toBe(copied.length);
        r.claims.forEach((c, i) => expect(copied[i]).toContain(c.text.replace(/[*_]/g, '')));
      }),
      runs(100),
    );
  });
});

describe('chatter of every kind', () => {
  const CHATTER = [
    'Hey!', 'Hi there!', "You're welcome!", 'I hope that answers your question.', 'Does that help?', 'Would you like me to find out more?',
    'Let me know if you have any other questions!', 'I might be wrong, though.', 'Is there anything else you would like to know?',
    "I'm happy to help with anything else.", 'Thanks!', 'Thank you for your patience.', 'Feel free to reach out if you need more information.',
    'Do you want me to summarise the rest?', 'Hope this helps! 😊', 'Good morning!', 'Can I help with anything else?', 'Sorry, I am not certain about that.',
    'Gern geschehen!', 'Merci beaucoup !', '¡Hola!', 'Any other questions?', 'What else would you like to know?', 'Please let me know.',
    'Olá!', 'Obrigado!', 'Конечно!', 'Здравствуйте!', 'Спасибо!', 'Дякую!', 'Merhaba!', 'नमस्ते!', 'धन्यवाद!', 'مرحبا!', 'شكرا!',
    'สวัสดีครับ', 'ขอบคุณค่ะ', '안녕하세요!', '감사합니다.',
  ];
  it('alone it is no claim', () => {
    fc.assert(
      fc.property(copyCase, fc.array(fc.constantFrom(...CHATTER), { minLength: 1, maxLength: 3 }), (c, said) => {
        const r = checkGrounding({ sources: sourcesOf(c), answer: said.join(' ') });
        expect(r.claims, describeClaims(r)).toEqual([]);
        expect(r.grounded).toBe(true);
      }),
      runs(300),
    );
  });

  it('an opener in any language before a copy leaves it grounded', () => {
    fc.assert(
      fc.property(copyCase, fc.constantFrom('Конечно!', 'Claro!', 'Olá!', 'नमस्ते!', 'مرحبا!', 'Merhaba!', '네.', 'Sure,'), (c, opener) => {
        const answer = `${opener} ${c.copied.join(' ')}`;
        const r = checkGrounding({ sources: sourcesOf(c), answer });
        expect(r.grounded, `${JSON.stringify(answer)}: ${describeClaims(r)}`).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
      }),
      runs(100),
    );
  });

  it('an emoji ends a greeting as a full stop would', () => {
    fc.assert(
      fc.property(copyCase, fc.constantFrom('Hi there 👋 Hey!', 'Hello 😊 Great question!', 'Hey 🙂 Sure!'), fc.constantFrom(' ', '\n'), (c, hello, gap) => {
        const answer = hello + gap + c.copied.join(' ');
        const r = checkGrounding({ sources: sourcesOf(c), answer });
        expect(r.grounded, `${JSON.stringify(answer)}: ${describeClaims(r)}`).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
      }),
      runs(100),
    );
  });
});

describe('dates in several formats', () => {
  const MONTHS = ['January', 'February', 'March', 'April', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
  const date = fc.record({ day: fc.integer({ min: 1, max: 28 }), month: fc.integer({ min: 1, max: 12 }).filter((m) => m !== 5), year: fc.integer({ min: 1950, max: 2030 }) });
  const name = (m: number) => MONTHS[m - (m > 5 ? 2 : 1)]!;
  const pad = (n: number) => String(n).padStart(2, '0');
  const FORMATS: Array<(d: { day: number; month: number; year: number }) => string> = [
    (d) => `${d.day} ${name(d.month)} ${d.year}`,
    (d) => `${name(d.month)} ${d.day}, ${d.year}`,
    (d) => `${d.year}-${pad(d.month)}-${pad(d.day)}`,
    (d) => `${pad(d.day)}/${pad(d.month)}/${d.year}`,
  ];
  const sentenceOf = (when: string) => `The agreement was signed in Geneva on ${when} by both parties.`;

  it('an answer that writes the source date in another format is grounded', () => {
    fc.assert(
      fc.property(date, fc.nat(2), fc.nat(3), (d, from, to) => {
        const r = checkGrounding({ sources: [sentenceOf(FORMATS[from]!(d))], answer: sentenceOf(FORMATS[to]!(d)) });
        expect(r.grounded, describeClaims(r)).toBe(true);
      }),
      runs(100),
    );
  });

  it('changing the day or the month lowers the score, whatever the format', () => {
    fc.assert(
      fc.property(date, fc.nat(2), fc.nat(3), fc.boolean(), (d, from, to, day) => {
        const sources = [sentenceOf(FORMATS[from]!(d))];
        const other = day ? { ...d, day: (d.day % 28) + 1 } : { ...d, month: (d.month % 12) + 1 === 5 ? 6 : (d.month % 12) + 1 };
        fc.pre(other.day !== d.month && other.month !== d.day);
        const same = checkGrounding({ sources, answer: sentenceOf(FORMATS[to]!(d)) }).score;
        const changed = checkGrounding({ sources, answer: sentenceOf(FORMATS[to]!(other)) }).score;
        expect(changed).toBeLessThan(same);
      }),
      runs(100),
    );
  });
});

describe('signed numbers', () => {
  const signed = fc.record({
    n: fc.integer({ min: 1, max: 60 }),
    minus: fc.constantFrom('-', '\u2212'),
    frame: fc.constantFrom(
      (v: string) => `Temperatures in Yakutsk ranged from ${v}°C in the morning to 3°C at noon.`,
      (v: string) => `The account closed the quarter at ${v} million euros.`,
      (v: string) => `Water in the tank froze at ${v} degrees (${v} on the gauge).`,
    ),
  });

  it('dropping or adding a minus sign lowers the score', () => {
    fc.assert(
      fc.property(signed, fc.boolean(), ({ n, minus, frame }, sourceNegative) => {
        const negative = frame(`${minus}${n}`);
        const positive = frame(String(n));
        const [source, other] = sourceNegative ? [negative, positive] : [positive, negative];
        fc.pre(n !== 3);
        const same = checkGrounding({ sources: [source], answer: source }).score;
        expect(checkGrounding({ sources: [source], answer: other }).score).toBeLessThan(same);
      }),
      runs(100),
    );
  });
});

describe('Chinese and Japanese sentences', () => {
  it('end at 。！？ without a space: each is a claim whose evidence is its own sentence', () => {
    const cjk = KINDS.cjk!.filter((s) => s.endsWith('。'));
    fc.assert(
      fc.property(fc.shuffledSubarray(cjk, { minLength: 2 }), fc.constantFrom('', ' ', '\n'), (copied, gap) => {
        const sources = [cjk.join('')];
        const r = checkGrounding({ sources, answer: copied.join(gap) });
        expect(r.claims.length, describeClaims(r)).toBe(copied.length);
        r.claims.forEach((c, i) => {
          expect(c.text).toBe(copied[i]);
          expect(copied[i]).toContain(c.evidence!.text);
        });
        expect(r.grounded).toBe(true);
      }),
      runs(50),
    );
  });
});

describe('dotted numbers: versions and German thousands', () => {
  const version = fc.tuple(fc.nat(30), fc.nat(30), fc.nat(30));
  const VERSION_FRAMES = [
    (v: string) => `Version v${v} fixed the memory leak in the parser.`,
    (v: string) => `Run npm install vitest@^${v} before the tests.`,
    (v: string) => `The package needs typescript ~${v} or later.`,
  ];

  it('changing a version number lowers the score', () => {
    fc.assert(
      fc.property(version, fc.nat(2), fc.constantFrom(...VERSION_FRAMES), ([a, b, c], part, frame) => {
        const v = `${a}.${b}.${c}`;
        const parts = [a, b, c];
        parts[part]! += 1;
        const source = frame(v);
        const same = checkGrounding({ sources: [source], answer: source }).score;
        const changed = checkGrounding({ sources: [source], answer: frame(parts.join('.')) });
        expect(changed.score).toBeLessThan(same);
        expect(changed.grounded).toBe(false);
      }),
      runs(100),
    );
  });

  // Thousands grouped by commas, full stops (German), spaces, no-break spaces (French), thin spaces.
  const GROUPINGS: Array<(n: number) => string> = [
    (n) => n.toLocaleString('en-US'),
    (n) => n.toLocaleString('de-DE'),
    (n) => n.toLocaleString('en-US').replace(/,/g, ' '),
    (n) => n.toLocaleString('fr-FR'),
    (n) => n.toLocaleString('en-US').replace(/,/g, '\u2009'),
  ];

  it('1,234,567, 1.234.567 and 1 234 567 are one number', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1_000_000, max: 999_999_999 }), fc.constantFrom(...GROUPINGS), fc.constantFrom(...GROUPINGS), (n, from, to) => {
        const frame = (x: string) => `Die Stadt hatte im Jahr 2020 genau ${x} Einwohner.`;
        const sources = [frame(from(n))];
        expect(checkGrounding({ sources, answer: frame(to(n)) }).grounded).toBe(true);
        // Another number, not a rounding of it (those are accepted).
        expect(checkGrounding({ sources, answer: frame(to(n + 1_111_111)) }).grounded).toBe(false);
      }),
      runs(100),
    );
  });
});

describe('RAG answers with citation marks', () => {
  const MARKS: Array<(i: number) => string> = [
    (i) => ` [${i}]`,
    (i) => ` [${i}][${i + 1}]`,
    (i) => ` (Source ${i})`,
    (i) => ` (Sources ${i} and ${i + 1})`,
    (i) => ` (${i})`,
    (i) => `^${i}`,
    (i) => `[^${i}]`,
    (i) => ` ([Source ${i}](https://example.org/doc/${i}))`,
  ];
  const FOOTERS = [
    '',
    '\n\nSources:\n[1] Annual report, Example Corp\n[2] Wikipedia',
    '\n\n**References:**\n1. Müller, J. (2020). Rivers of Europe. Springer.\n2. https://example.org/rhine',
    '\n\n[^1]: Source 1, page 4\n[^2]: Deutsche Welle, 2021',
    ' [Wikipedia](https://en.wikipedia.org/wiki/Rhine)',
    '\n\nSource: [Deutsche Welle](https://dw.com/a/123)',
  ];
  // The pages the marks and footers cite, as a RAG app lists its retrieved documents: a cited page is checked
  // like any link.
  const PAGES = `Retrieved: ${[1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => `https://example.org/doc/${i}`).join(' ')} https://en.wikipedia.org/wiki/Rhine https://dw.com/a/123 https://example.org/rhine`;
  // A mark goes before the sentence's full stop, or after it for the footnote styles.
  const cite = (s: string, mark: string) => (/^[\^[]/.test(mark) && /[.!]$/.test(s) ? s + mark : s.replace(/([.!]?)$/, `${mark}$1`));

  it('cited copied sentences are grounded, marks and the list of sources flag nothing', () => {
    fc.assert(
      fc.property(copyCase, fc.constantFrom(...MARKS), fc.constantFrom(...FOOTERS), fc.constantFrom(...OPENERS), (c, mark, footer, opener) => {
        // After a number a caret is a power ("10^6"), not a footnote.
        fc.pre(!mark(1).startsWith('^') || c.copied.every((s) => !/\p{N}$/u.test(s)));
        // A link cites when it stands after a sentence's end (or a "Source:"), not after any word.
        fc.pre(!footer.startsWith(' [') || /[.!?\u3002]['"]?$/.test(c.copied[c.copied.length - 1]!));
        const answer = opener + c.copied.map((s, i) => cite(s, mark(i + 1))).join(' ') + footer;
        const r = checkGrounding({ sources: [...sourcesOf(c), PAGES], answer });
        expect(r.grounded, `${JSON.stringify(answer)}: ${describeClaims(r)}`).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
      }),
      runs(300),
    );
  });

  it('a cited sentence with a changed number still scores lower', () => {
    fc.assert(
      fc.property(copyCase, fc.constantFrom(...MARKS), fc.nat(), (c, mark, pick) => {
        const sources = sourcesOf(c);
        const s = c.copied[0]!;
        const changed = withChangedNumber(s, sources, pick);
        const a = checkGrounding({ sources, answer: cite(s, mark(1)) }).score;
        const b = checkGrounding({ sources, answer: cite(changed, mark(1)) }).score;
        expect(b, cite(changed, mark(1))).toBeLessThan(a);
      }),
      runs(200),
    );
  });
});

describe('code fences', () => {
  it("a fence's language is no claim", () => {
    fc.assert(
      fc.property(copyCase, fc.constantFrom('json', 'bash', 'yaml', 'text', 'python', ''), (c, lang) => {
        const answer = `\`\`\`${lang}\n${c.copied.join('\n')}\n\`\`\``;
        const r = checkGrounding({ sources: sourcesOf(c), answer });
        expect(r.grounded, `${JSON.stringify(answer)}: ${describeClaims(r)}`).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
      }),
      runs(100),
    );
  });
});

describe('long multi-source documents', () => {
  // Records that share most of their words ("opened", "cost", "million"), as a catalogue, a ledger or a log
  // does: every such word's posting holds most of the 100 KB's sentences.
  function records(seed: number): { sources: string[]; sentences: string[] } {
    let x = seed;
    const next = (n: number) => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) % n);
    const syllables = ['ka', 'ro', 'mi', 'tu', 'len', 'dor', 'vas', 'pel', 'qui', 'zan', 'bri', 'to', 'ne', 'sa', 'gul', 'fen'];
    const word = () => syllables[next(16)]! + syllables[next(16)]! + syllables[next(16)]!;
    const sentences: string[] = [];
    const sources = Array.from({ length: 8 }, () => {
      let text = '';
      while (text.length < 12_800) {
        const s = `The ${word()} near the ${word()} opened in ${1900 + next(120)} with ${100 + next(900)} ${word()}s and cost $${10 + next(90)} million.`;
        sentences.push(s);
        text += s + (next(5) === 0 ? '\n\n' : ' ');
      }
      return text;
    });
    return { sources, sentences };
  }

  it('copied sentences from 100 KB in 8 messages are grounded, each with its own sentence as evidence', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 30 }), (seed) => {
        const { sources, sentences } = records(seed);
        const copied = Array.from({ length: 45 }, (_, i) => sentences[(i * 97 + seed) % sentences.length]!);
        const answer = copied.map((s, i) => `${s.slice(0, -1)} [${(i % 8) + 1}].`).join(' ');
        const r = checkGrounding({ sources, answer });
        expect(r.grounded, describeClaims(r)).toBe(true);
        for (const c of r.claims) {
          expect(c.evidence, c.text).not.toBeNull();
          expect(c.evidence!.text).toBe(sources[c.evidence!.source]!.slice(c.evidence!.start, c.evidence!.end));
          expect(c.evidence!.text).toContain(c.text.replace(/\s*$/, ''));
        }
      }),
      runs(3),
    );
  });
});

describe('units in other spellings', () => {
  // An abbreviation in capitals is read as a name: its spelled-out unit must still find it.
  const ABBREVIATED: Array<[string, string]> = [['GB', 'gigabytes'], ['MB', 'megabytes'], ['KB', 'kilobytes'], ['TB', 'terabytes'], ['MW', 'megawatts'], ['kW', 'kilowatts'], ['GW', 'gigawatts'], ['kg', 'kilograms'], ['km', 'kilometres']];

  it('42 GB and 42 gigabytes are one quantity, either way round', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 999 }), fc.constantFrom(...ABBREVIATED), fc.boolean(), (n, [short, long], spelledInSource) => {
        const frame = (unit: string) => `The storage array in Leeds holds ${n} ${unit} of backups.`;
        const [from, to] = spelledInSource ? [long, short] : [short, long];
        const r = checkGrounding({ sources: [frame(from)], answer: frame(to) });
        expect(r.grounded, `${frame(from)} → ${frame(to)}: ${describeClaims(r)}`).toBe(true);
        expect(r.flaggedSpans).toEqual([]);
        expect(checkGrounding({ sources: [frame(from)], answer: `The storage array in Leeds holds ${n + 5} ${to} of backups.` }).grounded).toBe(false);
      }),
      runs(60),
    );
  });

  // The same quantity with its unit spelled another way is a copy; another number, or another scale, is not.
  const SPELLINGS: Array<[string, string[]]> = [
    ['°C', ['°C', ' °C', ' degrees Celsius', ' degrees C', ' degrees centigrade', ' ºC'.replace('º', '°')]],
    ['°F', ['°F', ' °F', ' degrees Fahrenheit', ' degrees F']],
  ];
  const FRAMES = [
    (q: string) => `The water in the lake reached ${q} on Tuesday.`,
    (q: string) => `It is ${q} and sunny in Lisbon.`,
    (q: string) => `{"city": "Lisbon", "temperature": ${q.replace(/\D+$/, '')}, "unit": "${q.includes('F') ? 'Fahrenheit' : 'Celsius'}", "sky": "sunny"}`,
  ];

  it('21 °C and 21 degrees Celsius are one quantity; 24 °C or 21 °F is another', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 45 }), fc.constantFrom(...SPELLINGS), fc.nat(), fc.nat(), fc.nat(2), (n, [, ways], i, j, f) => {
        const sources = [FRAMES[f]!(`${n}${ways[i % ways.length]!}`)];
        const say = FRAMES[f === 2 ? 1 : f]!;
        const answer = say(`${n}${ways[j % ways.length]!}`);
        const same = checkGrounding({ sources, answer });
        expect(same.grounded, `${sources[0]} → ${answer}: ${describeClaims(same)}`).toBe(true);
        expect(same.flaggedSpans).toEqual([]);
        const otherNumber = checkGrounding({ sources, answer: say(`${n + 3}${ways[j % ways.length]!}`) });
        expect(otherNumber.grounded).toBe(false);
        const otherScale = checkGrounding({ sources, answer: say(`${n}${ways[j % ways.length]!.replace(/Celsius|centigrade|C$/, (m) => (m === 'C' ? 'F' : 'Fahrenheit'))}`) });
        if (ways[0] === '°C') expect(otherScale.score).toBeLessThan(same.score);
      }),
      runs(100),
    );
  });
});

// Short answers to a question, quotes, code and tool results: the kinds of text an assistant sends back most.

const QA = [
  { q: 'What is the capital of France?', src: 'Paris is the capital of France.', a: 'Paris', wrong: 'Lyon' },
  { q: 'When was the Eiffel Tower completed?', src: 'The Eiffel Tower was completed in 1889.', a: '1889', wrong: '1887' },
  { q: 'Who wrote Emma?', src: 'Emma was written by Jane Austen and published in 1815.', a: 'Jane Austen', wrong: 'Mary Shelley' },
  { q: 'How tall is Mount Kilimanjaro?', src: 'Mount Kilimanjaro rises to 5,895 metres above sea level.', a: '5,895 metres', wrong: '5,985 metres' },
  { q: 'Which company makes the iPhone?', src: 'The iPhone is made by Apple.', a: 'Apple', wrong: 'Samsung' },
];
const SHORT = [(x: string) => `${x}.`, (x: string) => x, (x: string) => `**${x}**`, (x: string) => `The answer is ${x}.`, (x: string) => `Sure! ${x}.`, (x: string) => `${x}. Let me know if you need anything else!`, (x: string) => `It's ${x}.`];

const SHORT_CHATTER = ['Sure!', 'Great question!', 'Hope this helps!', 'Let me know if you need anything else.', 'Is there anything else you would like to know?', 'Thanks for asking!'];

describe('short answers: a name, a number, yes or no', () => {
  it('short answers: a name or a number', () => {
    fc.assert(fc.property(fc.constantFrom(...QA), fc.constantFrom(...SHORT), fc.boolean(), (qa, frame, withQ) => {
      const question = withQ ? qa.q : undefined;
      const sources = withQ ? [qa.src] : [qa.q, qa.src];
      const ok = checkGrounding({ sources, answer: frame(qa.a), question });
      expect(ok.grounded, JSON.stringify([frame(qa.a), ok.claims])).toBe(true);
      const ansW = frame(qa.wrong);
      const bad = checkGrounding({ sources, answer: ansW, question });
      expect(bad.score, ansW).toBeLessThan(ok.score);
      expect(bad.grounded, JSON.stringify([ansW, bad.claims])).toBe(false);
      for (const s of bad.flaggedSpans) for (const c of SHORT_CHATTER) { const at = ansW.indexOf(c); if (at >= 0) expect(s.start >= at + c.length || s.end <= at, ansW).toBe(true); }
      for (const s of bad.flaggedSpans) expect(s.text, ansW).not.toMatch(/^[*_\s]|[*_\s]$/);
    }), runs(100));
  });

  it('yes/no answers', () => {
    const YN = [
      { q: 'Does the museum open on Sundays?', src: 'The museum opens on Sundays from 10 am.', yes: true, stmt: 'the museum opens on Sundays', neg: 'the museum does not open on Sundays' },
      { q: 'Is the library closed on Mondays?', src: 'The library is closed on Mondays.', yes: true, stmt: 'the library is closed on Mondays', neg: 'the library is not closed on Mondays' },
      // Not yet: "No, the hotel does not have a pool." against "The hotel does not have a pool": the "No" reads
      // as negating "hotel" and scores as low as "Yes, the hotel has a pool." (reading it as an answer's particle
      // lowered HaluEval and WiCE).
    ];
    fc.assert(fc.property(fc.constantFrom(...YN), fc.constantFrom('', ' 😊', ' Let me know if you need anything else.'), (c, tail) => {
      const right = `${c.yes ? 'Yes' : 'No'}, ${c.yes ? c.stmt : c.neg}.${tail}`;
      const wrong = `${c.yes ? 'No' : 'Yes'}, ${c.yes ? c.neg : c.stmt}.${tail}`;
      const a = checkGrounding({ sources: [c.src], answer: right, question: c.q });
      const b = checkGrounding({ sources: [c.src], answer: wrong, question: c.q });
      expect(a.grounded, JSON.stringify([right, a.claims])).toBe(true);
      expect(b.score, wrong).toBeLessThan(a.score);
      expect(checkGrounding({ sources: [c.src], answer: `Yes, it does.${tail}`, question: c.q }).flaggedSpans).toEqual([]);
    }), runs(30));
  });
});

const CODE = [
  { src: 'Start the server with node --max-old-space-size=4096 dist/bin.js to raise the heap limit.', ident: '--max-old-space-size=4096', wrong: '--max-semi-space-size=4096' },
  { src: 'Set SVC_GROUNDING_THRESHOLD to 0.6 to flag more answers.', ident: 'SVC_GROUNDING_THRESHOLD', wrong: 'SVC_GROUNDING_CUTOFF' },
  { src: 'Call checkGrounding with the sources and the answer.', ident: 'checkGrounding', wrong: 'verifyGrounding' },
  { src: 'Install the dependencies with npm ci --omit=dev on the production host.', ident: 'npm ci --omit=dev', wrong: 'npm ci --omit=peer' },
  { src: 'The config file lives at /etc/svc/config.yaml on Linux.', ident: '/etc/svc/config.yaml', wrong: '/etc/svc/settings.yaml' },
  { src: 'Use git rebase --onto main feature to move the branch.', ident: 'git rebase --onto main feature', wrong: 'git rebase --onto develop feature' },
];
const QUOTES = [
  (s: string) => `The documentation says: "${s}"`,
  (s: string) => `> ${s}`,
  (s: string) => `Here is the relevant part:\n\n> ${s}`,
  (s: string) => `As stated: \u201c${s}\u201d`,
];
const CODE_LAYOUT = [
  (s: string, id: string) => s.replace(id, `\`${id}\``),
  (s: string, id: string) => `${s}\n\n\`\`\`bash\n${id}\n\`\`\``,
  (s: string) => s,
];
const QUOTE_CHATTER = ['Sure!', 'Hope this helps!', 'Let me know if you need anything else.', 'Here is the relevant part:', 'The documentation says:', 'As stated:'];

function spansAreClean(answer: string, spans: Array<{ start: number; end: number; text: string }>) {
  let prev = 0;
  for (const s of spans) {
    expect(s.start).toBeGreaterThanOrEqual(prev);
    expect(s.text).toBe(answer.slice(s.start, s.end));
    // Never starts or ends on markup or white space.
    expect(s.text, JSON.stringify([answer, s.text])).not.toMatch(/^[\s>*_`"\u201c\u201d#|-]|[\s>*_`"\u201c\u201d#|]$/);
    for (const c of QUOTE_CHATTER) {
      const at = answer.indexOf(c);
      if (at >= 0) expect(s.start >= at + c.length || s.end <= at, JSON.stringify([answer, s.text])).toBe(true);
    }
    prev = s.end;
  }
}

describe('quoted text and code copied from a source', () => {
  it('quotes and code copied are grounded; changed ones lower and flag', () => {
    fc.assert(fc.property(fc.constantFrom(...CODE), fc.constantFrom(...QUOTES), fc.constantFrom(...CODE_LAYOUT), fc.constantFrom('', 'Sure! ', 'Sure!\n\n'), fc.constantFrom('', ' Hope this helps!', '\n\nLet me know if you need anything else.'), (c, quote, layout, opener, tail) => {
      const sources = [`Intro text about deployments. ${c.src} Other notes follow here.`];
      const ok = opener + quote(layout(c.src, c.ident)) + tail;
      const a = checkGrounding({ sources, answer: ok });
      expect(a.grounded, JSON.stringify([ok, a.claims])).toBe(true);
      expect(a.flaggedSpans).toEqual([]);
      const bad = opener + quote(layout(c.src.replace(c.ident, c.wrong), c.wrong)) + tail;
      const b = checkGrounding({ sources, answer: bad });
      expect(b.score, bad).toBeLessThan(a.score);
      spansAreClean(bad, b.flaggedSpans);
      // append unsupported
      const more = checkGrounding({ sources, answer: `${ok}\n\n> Otters juggle turquoise saxophones.` });
      expect(more.score).toBeLessThanOrEqual(a.score);
      spansAreClean(`${ok}\n\n> Otters juggle turquoise saxophones.`, more.flaggedSpans);
    }), runs(150));
  });
});

const TOOL = [
  { src: '{"city": "Oslo", "temperature": 7, "unit": "C", "condition": "rain", "wind_speed": 30}', ans: 'It is 7 °C with rain in Oslo and a wind speed of 30.' },
  { src: '{"order_id": "A-1042", "status": "shipped", "carrier": "DHL", "eta_days": 3}', ans: 'Order A-1042 has shipped with DHL, with an ETA of 3 days.' },
  { src: '{"results": [{"title": "Dune", "year": 1965, "author": "Frank Herbert"}]}', ans: 'Dune by Frank Herbert came out in 1965.' },
  { src: '[{"name": "Lena Fischer", "role": "CTO", "joined": 2019}, {"name": "Omar Haddad", "role": "CFO", "joined": 2021}]', ans: 'Lena Fischer is the CTO and joined in 2019.' },
  { src: '{"balance": 1250.75, "currency": "EUR", "overdraft": false}', ans: 'Your balance is 1250.75 EUR.' },
];
const CHATTER_BEFORE = ['', 'Sure! ', 'Here is what I found:\n\n', 'Good question! '];
const CHATTER_AFTER = ['', ' Let me know if you need anything else.', '\n\nHope this helps! 😊', ' Is there anything else I can check?'];
const TOOL_LAYOUT = [(s: string) => s, (s: string) => `- ${s}`, (s: string) => `**${s}**`, (s: string) => `> ${s}`];

describe('answers from JSON tool results', () => {
  it('tool results: copy grounded; a changed number/name lowers; spans only in the claim', () => {
    fc.assert(fc.property(fc.constantFrom(...TOOL), fc.constantFrom(...CHATTER_BEFORE), fc.constantFrom(...CHATTER_AFTER), fc.constantFrom(...TOOL_LAYOUT), fc.nat(), fc.boolean(), (t, pre, post, lay, pick, asMessage) => {
      const sources = asMessage ? ['What is the status?', t.src] : [t.src];
      const laid = lay(t.ans);
      const answer = pre + laid + post;
      const a = checkGrounding({ sources, answer, question: 'What is the status?' });
      expect(a.grounded, JSON.stringify([answer, a.claims])).toBe(true);
      expect(a.flaggedSpans).toEqual([]);
      const nums = [...t.ans.matchAll(/\d+(?:\.\d+)?/g)];
      const names = [...t.ans.matchAll(/(?<=[\p{L}\p{N},] )\p{Lu}\p{Ll}{2,}/gu)];
      const useNum = (pick % 2 === 0 || names.length === 0) && nums.length > 0;
      const m = useNum ? nums[pick % nums.length]! : names[pick % names.length]!;
      const repl = useNum ? String(Math.floor(Number(m[0])) + 7) + '3' : 'Valdoria';
      const changed = t.ans.slice(0, m.index) + repl + t.ans.slice(m.index! + m[0].length);
      const bad = pre + lay(changed) + post;
      const b = checkGrounding({ sources, answer: bad, question: 'What is the status?' });
      expect(b.score, bad).toBeLessThan(a.score);
      expect(b.grounded, JSON.stringify([bad, b.claims])).toBe(false);
      const claimStart = pre.length;
      const claimEnd = pre.length + lay(changed).length;
      let prev = 0;
      for (const s of b.flaggedSpans) {
        expect(s.start).toBeGreaterThanOrEqual(prev);
        expect(s.start, JSON.stringify([bad, s])).toBeGreaterThanOrEqual(claimStart);
        expect(s.end, JSON.stringify([bad, s])).toBeLessThanOrEqual(claimEnd);
        expect(s.text, JSON.stringify([bad, s])).not.toMatch(/^[\s>*_`"#|-]|[\s>*_`"#|]$/);
        prev = s.end;
      }
      expect(b.flaggedSpans.map((s) => s.text)).toContain(repl);
    }), runs(150));
  });

  it('negation in tool-result answers and fragments lowers', () => {
    const CASES = [
      { src: 'The museum is open on Mondays.', ans: 'The museum is open on Mondays.' },
      { src: 'Pets are allowed in the hotel rooms.', ans: '- Pets: allowed in the hotel rooms' },
      { src: 'The bridge was closed for repairs in 2021.', ans: '**Bridge:** closed for repairs in 2021' },
    ];
    for (const c of CASES) {
      const a = checkGrounding({ sources: [c.src], answer: c.ans }).score;
      const neg = c.ans.replace(/(is |are |: |\*\* )(open|allowed|closed)/, '$1not $2');
      const b = checkGrounding({ sources: [c.src], answer: neg });
      expect(b.score, neg).toBeLessThan(a);
    }
  });
});

const MIX_SOURCES = ['The Louvre received 8.9 million visitors in 2023.', 'The bridge spans 1.2 km across the bay.', 'Marta Lopez won the regional chess title in 2018.', 'The museum does not open on Mondays.'];
const MIX_UNSUPPORTED = ['The Prado received 4.1 million visitors in 2021.', 'Otters juggle turquoise saxophones.', 'Kenji Watanabe won the national title in 2016.', 'The bridge spans 3.4 km across the river.', 'The museum opens on Mondays.'];
const MIX_CHATTER = ['Sure!', 'Great question!', 'Hope this helps! 😊', 'Let me know if you need anything else.', 'Is there anything else you would like to know?', 'Thanks for asking!', 'Here is a summary:', '## Summary', '**Note:**', '---', 'Hi there 👋'];
const MIX_LAYOUTS = [(s: string) => s, (s: string) => `- ${s}`, (s: string) => `* **${s}**`, (s: string) => `> ${s}`, (s: string) => `1. ${s}`, (s: string) => `| ${s} |`, (s: string) => `_${s}_`, (s: string) => `\`${s}\``];

describe('spans in answers that mix claims, chatter and markup', () => {
  it('spans never overlap, never cover chatter, never begin or end on markup', () => {
    fc.assert(fc.property(fc.array(fc.oneof(fc.constantFrom(...MIX_SOURCES).map((s) => ({ s, chat: false })), fc.constantFrom(...MIX_UNSUPPORTED).map((s) => ({ s, chat: false })), fc.constantFrom(...MIX_CHATTER).map((s) => ({ s, chat: true }))), { minLength: 1, maxLength: 6 }), fc.constantFrom(...MIX_LAYOUTS), fc.constantFrom('\n', ' ', '\n\n'), (parts, lay, sep) => {
      // A heading or a rule is one only on its own line.
      fc.pre(sep !== ' ' || parts.every((p) => !/^(?:#|---)/.test(p.s)));
      let answer = '';
      const chatRanges: Array<[number, number]> = [];
      parts.forEach((p, i) => {
        if (i > 0) answer += sep;
        const laid = p.chat ? p.s : lay(p.s);
        if (p.chat) chatRanges.push([answer.length, answer.length + laid.length]);
        answer += laid;
      });
      const r = checkGrounding({ sources: MIX_SOURCES, answer });
      let prev = 0;
      for (const s of r.flaggedSpans) {
        expect(s.start, JSON.stringify([answer, r.flaggedSpans])).toBeGreaterThanOrEqual(prev);
        expect(s.end).toBeGreaterThan(s.start);
        expect(s.text).toBe(answer.slice(s.start, s.end));
        for (const [a, b] of chatRanges) expect(s.start >= b || s.end <= a, JSON.stringify([answer, s.text])).toBe(true);
        expect(s.text, JSON.stringify([answer, s.text])).not.toMatch(/^[\s>*_`"#|-]|[\s>*_`"#|]$/);
        prev = s.end;
      }
    }), runs(200));
  });
});

describe('math in LaTeX', () => {
  const FORMULAS = [
    'The cross-entropy loss is $L = -\\sum_i y_i \\log p_i$, summed over the classes.',
    'The variance is $\\sigma^2 = \\frac{1}{n} \\sum_{i=1}^{n} (x_i - \\mu)^2$ for a population.',
    'Kinetic energy is \\(E_k = \\frac{1}{2} m v^2\\) in classical mechanics.',
    'The update rule is $$w_{t+1} = w_t - \\eta \\nabla f(w_t)$$ for gradient descent.',
  ];

  it.each(FORMULAS)('a copied formula is grounded: %s', (s) => {
    const r = checkGrounding({ sources: [s, KINDS.numbers![0]!], answer: s });
    expect(r.grounded, describeClaims(r)).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
  });

  it('a variable of a formula changed to one no source has is flagged there', () => {
    fc.assert(
      fc.property(fc.constantFrom(...FORMULAS), fc.nat(), fc.constantFrom('q', 'z', 'k', 'b'), (s, pick, other) => {
        const vars = [...s.matchAll(/(?<=[\s{(^_\\$=-])([a-z])(?=[_^\s}),$]|$)/g)].filter((m) => {
          const before = s.slice(0, m.index);
          return (before.split('$').length % 2 === 0 || /\\\(|\$\$/.test(before)) && !s.includes(other);
        });
        fc.pre(vars.length > 0);
        const m = vars[pick % vars.length]!;
        const changed = s.slice(0, m.index) + other + s.slice(m.index! + 1);
        const r = checkGrounding({ sources: [s], answer: changed });
        expect(r.score, changed).toBeLessThan(DEFAULT_GROUNDING_THRESHOLD);
        expect(r.flaggedSpans.map((f) => f.text)).toContain(other);
      }),
      runs(100),
    );
  });

  it('dollar amounts are no math', () => {
    const s = 'The fee is $10 and the tax is $2 per order.';
    const r = checkGrounding({ sources: [s], answer: 'The fee is $10 and the tax is $2 per order.' });
    expect(r.grounded).toBe(true);
    expect(checkGrounding({ sources: [s], answer: 'The fee is $12 and the tax is $2 per order.' }).flaggedSpans.map((f) => f.text)).toEqual(['12']);
  });
});
