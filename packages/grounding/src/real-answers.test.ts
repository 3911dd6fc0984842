import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkGrounding } from './index.js';

// Answers real applications get that no labelled data set has: each a source, a faithful answer a model would
// give, and unfaithful twins with one figure, name or negation changed. `flagged` lists texts that must be
// among the flagged spans (others may be too); a grounded answer has none.

interface Case {
  source: string | string[];
  answer: string;
  grounded: boolean;
  flagged?: string[];
  question?: string;
}

function expectCase({ source, answer, grounded, flagged = [], question }: Case): void {
  const r = checkGrounding({ sources: Array.isArray(source) ? source : [source], answer, question });
  const spans = r.flaggedSpans.map((s) => s.text);
  const claims = JSON.stringify(r.claims.map((c) => [c.text, c.score]));
  expect(r.grounded, `${answer} → ${claims} ${JSON.stringify(spans)}`).toBe(grounded);
  if (grounded) expect(spans).toEqual([]);
  for (const f of flagged) expect(spans.some((s) => s.includes(f)), `${f} among ${JSON.stringify(spans)}`).toBe(true);
}

const SEED = Number(process.env.GROUNDING_PROPS_SEED ?? 20261129);

describe('numbers with a scale word', () => {
  const POPULATION = 'The city has a population of 2.1 million.';
  it.each<Case>([
    { source: POPULATION, answer: 'The city has a population of 2.1 million.', grounded: true },
    { source: POPULATION, answer: 'The city has about 2,100,000 inhabitants.', grounded: true },
    { source: POPULATION, answer: 'The city has a population of 2.1M.', grounded: true },
    { source: 'The city has 2,100,000 residents.', answer: 'The city has 2.1 million residents.', grounded: true },
    { source: POPULATION, answer: 'The city has a population of 2.1 billion.', grounded: false, flagged: ['2.1 billion'] },
    { source: POPULATION, answer: 'The city has a population of 2.1 thousand.', grounded: false, flagged: ['2.1 thousand'] },
    { source: 'Revenue was $48.2 billion in 2023.', answer: 'Revenue was $48.2 million in 2023.', grounded: false, flagged: ['48.2 million'] },
  ])('$source → $answer', (c) => expectCase(c));

  it('a figure given a scale its source number does not have is flagged, whatever the figure', () => {
    const scales = ['thousand', 'million', 'billion'] as const;
    fc.assert(
      fc.property(fc.integer({ min: 11, max: 999 }), fc.constantFrom(...scales), fc.constantFrom(...scales), (n, a, b) => {
        fc.pre(a !== b);
        const figure = `${Math.floor(n / 10)}.${n % 10}`;
        const r = checkGrounding({ sources: [`The fund manages $${figure} ${a} in assets.`], answer: `The fund manages $${figure} ${b} in assets.` });
        expect(r.grounded).toBe(false);
        const same = checkGrounding({ sources: [`The fund manages $${figure} ${a} in assets.`], answer: `The fund manages $${figure} ${a} in assets.` });
        expect(same.grounded).toBe(true);
      }),
      { seed: SEED, numRuns: 40 },
    );
  });
});

describe('times of day', () => {
  const HOURS = 'The store opens at 9 a.m. and closes at 6 p.m. on weekdays.';
  it.each<Case>([
    { source: HOURS, answer: 'The store opens at 9am and closes at 6pm on weekdays.', grounded: true },
    { source: HOURS, answer: 'On weekdays the store opens at 9 AM and closes at 6 PM.', grounded: true },
    { source: HOURS, answer: 'The store opens at 09:00 and closes at 18:00 on weekdays.', grounded: true },
    { source: HOURS, answer: 'The store is open 9:00–18:00 on weekdays.', grounded: true },
    { source: 'The store opens at 09:00 and closes at 18:00 on weekdays.', answer: 'The store opens at 9 a.m. and closes at 6 p.m. on weekdays.', grounded: true },
    { source: HOURS, answer: 'The store opens at 9 p.m. on weekdays.', grounded: false, flagged: ['9'] },
    { source: HOURS, answer: 'The store closes at 6 AM on weekdays.', grounded: false, flagged: ['6'] },
    { source: HOURS, answer: 'The store is open 9:00–17:00 on weekdays.', grounded: false, flagged: ['17'] },
    { source: HOURS, answer: 'The store opens at 10am on weekdays.', grounded: false, flagged: ['10'] },
  ])('$answer', (c) => expectCase(c));

  it('a time written on either clock or with either meridiem mark is the same hour; another hour is flagged', () => {
    const marks = [(h: number) => `${h} p.m.`, (h: number) => `${h}pm`, (h: number) => `${h} PM`, (h: number) => `${h + 12}:00`, (h: number) => `${h}:00 pm`];
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 11 }), fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 4 }), fc.integer({ min: 1, max: 11 }), (h, a, b, d) => {
        const source = `The last ferry leaves at ${marks[a]!(h)} from pier 3.`;
        expect(checkGrounding({ sources: [source], answer: `The last ferry leaves at ${marks[b]!(h)} from pier 3.` }).grounded).toBe(true);
        const other = ((h + d - 1) % 11) + 1;
        fc.pre(other !== h);
        expect(checkGrounding({ sources: [source], answer: `The last ferry leaves at ${marks[b]!(other)} from pier 3.` }).grounded).toBe(false);
        // The morning is not the evening.
        expect(checkGrounding({ sources: [source], answer: `The last ferry leaves at ${h} a.m. from pier 3.` }).grounded).toBe(false);
      }),
      { seed: SEED, numRuns: 60 },
    );
  });
});

describe('dates and ordinals written another way', () => {
  const DIVIDEND = 'The dividend is payable on November 15, 2024.';
  it.each<Case>([
    { source: DIVIDEND, answer: 'The dividend is payable on Nov. 15, 2024.', grounded: true },
    { source: DIVIDEND, answer: 'The dividend is payable on 15 Nov 2024.', grounded: true },
    { source: DIVIDEND, answer: 'The dividend is payable on 2024-11-15.', grounded: true },
    { source: 'The dividend is payable on Nov. 15, 2024.', answer: 'The dividend is payable on November 15, 2024.', grounded: true },
    { source: 'Payment is due by Sept. 30.', answer: 'Payment is due by September 30.', grounded: true },
    { source: DIVIDEND, answer: 'The dividend is payable on Dec. 15, 2024.', grounded: false, flagged: ['Dec'] },
    { source: DIVIDEND, answer: 'The dividend is payable on Nov. 16, 2024.', grounded: false, flagged: ['16'] },
    { source: 'She finished second in the 2019 marathon.', answer: 'She finished 2nd in the 2019 marathon.', grounded: true },
    { source: 'She finished 2nd in the 2019 marathon.', answer: 'She finished second in the 2019 marathon.', grounded: true },
    { source: 'The office is on the first floor.', answer: 'The office is on the 1st floor.', grounded: true },
    { source: 'She finished second in the 2019 marathon.', answer: 'She finished 3rd in the 2019 marathon.', grounded: false, flagged: ['3rd'] },
    { source: 'She finished second in the 2019 marathon.', answer: 'She finished 1st in the 2019 marathon.', grounded: false, flagged: ['1st'] },
  ])('$source → $answer', (c) => expectCase(c));

  it("a month's name or its abbreviation in the source backs either in the answer; another month is flagged", () => {
    const NAMES = ['January', 'February', 'March', 'April', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
    const ABBR = ['Jan.', 'Feb.', 'Mar.', 'Apr.', 'Jun.', 'Jul.', 'Aug.', 'Sep.', 'Oct.', 'Nov.', 'Dec.'];
    fc.assert(
      fc.property(fc.nat(10), fc.nat(10), fc.integer({ min: 1, max: 28 }), fc.boolean(), (m, other, day, abbreviatedSource) => {
        const [src, ans] = abbreviatedSource ? [ABBR, NAMES] : [NAMES, ABBR];
        const source = `The warehouse reopens on ${src[m]} ${day}, 2025.`;
        expect(checkGrounding({ sources: [source], answer: `The warehouse reopens on ${ans[m]} ${day}, 2025.` }).grounded).toBe(true);
        fc.pre(other !== m);
        expect(checkGrounding({ sources: [source], answer: `The warehouse reopens on ${ans[other]} ${day}, 2025.` }).grounded).toBe(false);
      }),
      { seed: SEED, numRuns: 40 },
    );
  });
});

describe('support chat: chatter is no claim, in English and other languages', () => {
  const SYSTEM = 'You are the support assistant for Parcelly, a parcel delivery service. Be concise.';
  const TOOL = '{"tracking_number": "PX-88231-DE", "status": "in_transit", "last_scan": {"location": "Leipzig hub", "time": "2024-06-11T08:42:00Z"}, "estimated_delivery": "2024-06-13", "carrier": "DHL"}';
  const QUESTION = 'Where is my parcel PX-88231-DE? It is late.';
  const CHATTER = [
    "I'm sorry to hear that your parcel is late.",
    "I'm really sorry to hear that.",
    "I'll look into this right away.",
    "I'll wait for your reply.",
    'I will get back to you as soon as possible.',
    'I understand your frustration.',
    "I don't have access to your account details, but I can help with general questions.",
    'Gerne!',
    '¡Claro!',
    'Bien sûr !',
    'Selbstverständlich!',
    '¡Por supuesto!',
    '您好！',
    '好的。',
    'こんにちは！',
    'かしこまりました。',
  ];
  it.each(CHATTER)('%s', (answer) => {
    const r = checkGrounding({ sources: [SYSTEM, QUESTION, TOOL], question: QUESTION, answer });
    expect(r.claims.map((c) => c.text)).toEqual([]);
    expect(r.grounded).toBe(true);
  });

  it('chatter around a faithful answer flags nothing; around an unfaithful one it flags the changed detail only', () => {
    const FAITHFUL = ['Your parcel PX-88231-DE was last scanned at the Leipzig hub.', 'It is in transit with DHL.'];
    const UNFAITHFUL = ['Your parcel PX-88231-DE was last scanned at the Dresden hub.', 'It is in transit with UPS.'];
    fc.assert(
      fc.property(fc.subarray(CHATTER, { minLength: 1, maxLength: 3 }), fc.nat(1), fc.boolean(), (chatter, which, before) => {
        const lay = (claim: string) => (before ? [...chatter, claim] : [claim, ...chatter]).join(' ');
        const good = checkGrounding({ sources: [SYSTEM, QUESTION, TOOL], question: QUESTION, answer: lay(FAITHFUL[which]!) });
        expect(good.grounded).toBe(true);
        expect(good.flaggedSpans).toEqual([]);
        const bad = checkGrounding({ sources: [SYSTEM, QUESTION, TOOL], question: QUESTION, answer: lay(UNFAITHFUL[which]!) });
        expect(bad.grounded).toBe(false);
        expect(bad.flaggedSpans.map((s) => s.text)).toEqual([['Dresden'], ['UPS']][which]);
      }),
      { seed: SEED, numRuns: 60 },
    );
  });
});

describe('answers in German, French, Spanish, Chinese and Japanese from sources in the same language', () => {
  const DE = 'Die Stadtwerke Freiburg erhöhen zum 1. Januar 2025 den Strompreis um 8 Prozent. Ein Haushalt mit 3.500 kWh Jahresverbrauch zahlt dann rund 96 Euro mehr im Jahr.';
  const FR = "La médiathèque de Nantes sera fermée du 4 au 18 août pour travaux. Les prêts en cours sont prolongés jusqu'au 2 septembre.";
  const ES = 'El vuelo IB3166 de Madrid a Lisboa sale a las 7:45 desde la terminal 4. La puerta de embarque cierra 20 minutos antes de la salida.';
  const ZH = '上海图书馆东馆于2022年9月28日正式开放。开放时间为每天9:00至21:00，周一闭馆。';
  const JA = '大阪市立科学館は2025年4月から5月まで改装のため休館します。プラネタリウムの入場料は大人600円です。';
  it.each<Case>([
    { source: DE, answer: 'Die Stadtwerke Freiburg erhöhen den Strompreis zum 1. Januar 2025 um 8 Prozent.', grounded: true },
    { source: DE, answer: 'Für einen Haushalt mit 3.500 kWh Jahresverbrauch sind das rund 96 Euro mehr pro Jahr.', grounded: true },
    // Its function words ("für", "einen", "das", "etwa", "pro") are no claim; "bedeutet" alone is new.
    { source: DE, answer: 'Für einen Haushalt mit 3.500 kWh bedeutet das etwa 96 € mehr pro Jahr.', grounded: true },
    { source: DE, answer: 'Die Stadtwerke Freiburg erhöhen den Strompreis zum 1. Januar 2025 um 12 Prozent.', grounded: false, flagged: ['12'] },
    { source: DE, answer: 'Die Stadtwerke Freiburg erhöhen den Strompreis zum 1. Februar 2025 um 8 Prozent.', grounded: false, flagged: ['Februar'] },
    { source: DE, answer: 'Die Stadtwerke Karlsruhe erhöhen den Strompreis um 8 Prozent.', grounded: false, flagged: ['Karlsruhe'] },
    { source: FR, answer: "La médiathèque de Nantes est fermée du 4 au 18 août pour des travaux, et les prêts sont prolongés jusqu'au 2 septembre.", grounded: true },
    { source: FR, answer: 'La médiathèque de Nantes est fermée du 4 au 28 août.', grounded: false, flagged: ['28'] },
    { source: FR, answer: 'La médiathèque de Rennes est fermée du 4 au 18 août.', grounded: false, flagged: ['Rennes'] },
    { source: ES, answer: 'El vuelo IB3166 sale a las 7:45 desde la terminal 4, y la puerta de embarque cierra 20 minutos antes.', grounded: true },
    { source: ES, answer: 'El vuelo IB3166 sale a las 8:45 desde la terminal 4.', grounded: false, flagged: ['8'] },
    { source: ES, answer: 'El vuelo IB3166 de Madrid a Barcelona sale a las 7:45.', grounded: false, flagged: ['Barcelona'] },
    { source: ZH, answer: '上海图书馆东馆于2022年9月28日正式开放。开放时间为每天9:00至21:00，周一闭馆。', grounded: true },
    { source: ZH, answer: '开放时间为每天9:00至22:00，周一闭馆。', grounded: false, flagged: ['22'] },
    { source: JA, answer: 'プラネタリウムの入場料は大人600円です。', grounded: true },
    { source: JA, answer: 'プラネタリウムの入場料は大人800円です。', grounded: false, flagged: ['800'] },
  ])('$answer', (c) => expectCase(c));

  it('a German date with an ordinal day ("zum 1. Januar") is one sentence, and one claim', () => {
    const r = checkGrounding({ sources: [DE], answer: 'Der Strompreis steigt zum 1. Januar 2025 um 8 Prozent.' });
    expect(r.claims.map((c) => c.text)).toEqual(['Der Strompreis steigt zum 1. Januar 2025 um 8 Prozent.']);
  });
});

describe('markdown: a long answer summarising a long source, laid out in tables, nested lists and bold labels', () => {
  const REPORT =
    'Quarterly report, Q3 2024.\n\nNorthwind Traders had revenue of $48.2 million in the third quarter, up 12% from a year earlier. Operating margin was 9.4%. ' +
    'The company opened 6 new stores, bringing the total to 142. The Seattle warehouse was closed in August. CEO Maria Alvarez said the company expects ' +
    'revenue of $50 million to $52 million in Q4. Headcount rose to 3,180 employees. The board approved a dividend of $0.35 per share, payable on November 15.';
  const NESTED = (store: string, stores: number) =>
    `## Q3 2024 highlights\n\n- **Financials**\n  - Revenue: **$48.2 million**, up 12% from a year earlier\n  - Operating margin: 9.4%\n` +
    `- **Operations**\n  1. Opened ${stores} new stores (142 in total)\n  2. Closed the ${store} warehouse in August\n- Outlook\n  - Q4 revenue of $50–52 million, according to CEO Maria Alvarez`;
  it.each<Case>([
    { source: REPORT, answer: NESTED('Seattle', 6), grounded: true },
    { source: REPORT, answer: NESTED('Portland', 6), grounded: false, flagged: ['Portland'] },
    { source: REPORT, answer: NESTED('Seattle', 8), grounded: false, flagged: ['8'] },
    { source: REPORT, answer: '**Key figures**\n- Revenue: $48.2 million\n- Dividend: $0.35 per share, payable Nov. 15', grounded: true },
    { source: REPORT, answer: '| Metric | Value |\n|---|---|\n| Revenue | $48.2 million |\n| Operating margin | 9.4% |\n| Headcount | 3,180 |', grounded: true },
    { source: REPORT, answer: '| Metric | Value |\n|---|---|\n| Revenue | $48.2 million |\n| Operating margin | 9.6% |', grounded: false, flagged: ['9.6'] },
  ])('$answer', (c) => expectCase(c));

  it('labels over a nested list are no claims; the items are', () => {
    const r = checkGrounding({ sources: [REPORT], answer: NESTED('Portland', 6) });
    expect(r.claims.map((c) => c.text)).not.toContain('Financials');
    expect(r.claims.map((c) => c.text)).not.toContain('Operations');
    expect(r.claims.map((c) => c.text)).not.toContain('Outlook');
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(['Portland']);
  });

  it('a bulleted sentence with items under it is still a claim', () => {
    const r = checkGrounding({ sources: [REPORT], answer: '- The Portland warehouse was closed.\n  - In August.' });
    expect(r.flaggedSpans.map((s) => s.text)).toContain('Portland');
  });
});

describe('code: API docs, config files and stack traces quoted in answers', () => {
  const DOCS =
    '## Authentication\n\nAll requests must include an API key in the `Authorization` header:\n\n```bash\ncurl https://api.acme.io/v2/orders \\\n  -H "Authorization: Bearer $ACME_API_KEY"\n```\n\n' +
    'Requests without a key return `401 Unauthorized`.\n\n### Pagination\n\nList endpoints accept `limit` (default 20, max 100) and `cursor` parameters. Use `next_cursor` from the response to fetch the next page.\n\n' +
    '```js\nconst res = await acme.orders.list({ limit: 50, cursor: page.next_cursor });\n```';
  const CONFIG = 'Here is our config.yaml:\nserver:\n  port: 8443\n  tls: true\ndatabase:\n  url: postgres://db.internal:5432/app\n  pool_size: 20\nlog_level: info';
  const TRACE =
    "I get this error when starting the app:\n\nTraceback (most recent call last):\n  File \"/app/main.py\", line 42, in <module>\n    from payments.client import StripeClient\n  File \"/app/payments/client.py\", line 7, in <module>\n    import stripe\nModuleNotFoundError: No module named 'stripe'";
  it.each<Case>([
    {
      source: DOCS,
      answer:
        'Requests without a key return `401 Unauthorized`. List endpoints accept `limit` (max 100); use `next_cursor` from the response as `cursor` to fetch the next page:\n\n```js\nconst res = await acme.orders.list({ limit: 50, cursor: page.next_cursor });\n```',
      grounded: true,
    },
    { source: DOCS, answer: 'Use `prev_cursor` from the response to fetch the next page.', grounded: false, flagged: ['prev_cursor'] },
    { source: DOCS, answer: 'Call `acme.orders.search` with a `limit` of 50.', grounded: false, flagged: ['acme.orders.search'] },
    { source: DOCS, answer: 'Requests without a key return `403 Unauthorized`.', grounded: false, flagged: ['403'] },
    { source: CONFIG, answer: 'The database pool size is set by `pool_size: 20`, and logging by `log_level: info`.', grounded: true },
    { source: CONFIG, answer: 'The database pool size is set by `max_pool_size: 20`.', grounded: false, flagged: ['max_pool_size'] },
    { source: CONFIG, answer: 'The database pool size is set by `pool_size: 50`.', grounded: false, flagged: ['50'] },
    {
      source: TRACE,
      answer: "The error `ModuleNotFoundError: No module named 'stripe'` comes from line 7 of `/app/payments/client.py`, in `import stripe`.",
      grounded: true,
    },
    { source: TRACE, answer: 'The error comes from line 7 of `payments/client.py`, in `import stripe`.', grounded: true },
    { source: TRACE, answer: 'The error comes from line 7 of `/app/payments/api.py`, in `import stripe`.', grounded: false, flagged: ['/app/payments/api.py'] },
    { source: TRACE, answer: 'The error comes from line 12 of `/app/payments/client.py`, in `import stripe`.', grounded: false, flagged: ['12'] },
  ])('$answer', (c) => expectCase(c));

  it('a path or key quoted from a source is grounded; one with a segment changed is flagged, whatever the words around it', () => {
    const segment = fc.stringMatching(/^[a-z]{3,8}$/);
    fc.assert(
      fc.property(fc.array(segment, { minLength: 2, maxLength: 4 }), segment, fc.constantFrom('.py', '.ts', '.yaml', ''), fc.boolean(), (dirs, other, ext, snake) => {
        const join = snake ? '_' : '/';
        const name = dirs.join(join) + ext;
        const changed = [...dirs.slice(0, -1), other].join(join) + ext;
        fc.pre(other !== dirs[dirs.length - 1] && !dirs.includes(other));
        const source = `The setting is read from \`${name}\` when the service starts.`;
        expect(checkGrounding({ sources: [source], answer: `The service reads \`${name}\` when it starts.` }).grounded).toBe(true);
        const r = checkGrounding({ sources: [source], answer: `The service reads \`${changed}\` when it starts.` });
        expect(r.grounded).toBe(false);
        expect(r.flaggedSpans.map((s) => s.text)).toContain(changed);
      }),
      { seed: SEED, numRuns: 60 },
    );
  });
});

describe('a share in percent written as a fraction of one', () => {
  it.each<Case>([
    { source: 'VAT (19%): €803.70', answer: 'VAT: 0.19', grounded: true },
    { source: 'The discount is 15 percent for members.', answer: 'The discount for members is 0.15.', grounded: true },
    { source: 'VAT (19%): €803.70', answer: 'VAT: 0.16', grounded: false, flagged: ['0.16'] },
    { source: 'VAT (19%): €803.70', answer: 'VAT: 19%', grounded: true },
  ])('$source → $answer', (c) => expectCase(c));
});

describe('German thousands and the text of a claim that ends in code', () => {
  it.each<Case>([
    { source: 'Das Unternehmen beschäftigt 1.200 Mitarbeiter in Stuttgart.', answer: 'Das Unternehmen beschäftigt 1200 Mitarbeiter in Stuttgart.', grounded: true },
    { source: 'Das Unternehmen beschäftigt 1200 Mitarbeiter in Stuttgart.', answer: 'Das Unternehmen beschäftigt 1.200 Mitarbeiter in Stuttgart.', grounded: true },
    { source: 'Das Unternehmen beschäftigt 1.200 Mitarbeiter in Stuttgart.', answer: 'Das Unternehmen beschäftigt 1.300 Mitarbeiter in Stuttgart.', grounded: false, flagged: ['1.300'] },
    { source: 'Das Unternehmen beschäftigt 1.200 Mitarbeiter in Stuttgart.', answer: 'Das Unternehmen beschäftigt 1300 Mitarbeiter in Stuttgart.', grounded: false, flagged: ['1300'] },
  ])('$source → $answer', (c) => expectCase(c));

  it("a claim's text keeps the backtick that closes its code", () => {
    const r = checkGrounding({ sources: ['Requests without a key return `401 Unauthorized`.'], answer: 'Requests without a key return `401 Unauthorized`. Keys never expire.' });
    expect(r.claims[0]!.text).toBe('Requests without a key return `401 Unauthorized`.');
  });
});

describe('units of measure', () => {
  it.each<Case>([
    { source: 'The trail is 12.5 km long.', answer: 'The trail is 12.5 kilometres long.', grounded: true },
    { source: 'The trail is 12.5 km long.', answer: 'The trail is 12.5 kilometers long.', grounded: true },
    { source: 'The trail is 12.5 kilometres long.', answer: 'The trail is 12.5 km long.', grounded: true },
    { source: 'The package weighs 2 kg.', answer: 'The package weighs 2 kilograms.', grounded: true },
    { source: 'The tank holds 50 litres.', answer: 'The tank holds 50 liters.', grounded: true },
    { source: 'The tank holds 50 litres.', answer: 'The tank holds 50 l.', grounded: true },
    { source: 'The trail is 12.5 km long.', answer: 'The trail is 12.5 miles long.', grounded: false, flagged: ['miles'] },
    { source: 'The package weighs 2 kg.', answer: 'The package weighs 2 lbs.', grounded: false, flagged: ['lbs'] },
    { source: 'The tank holds 50 litres.', answer: 'The tank holds 50 gallons.', grounded: false, flagged: ['gallons'] },
    { source: 'The screen measures 27 inches.', answer: 'The screen measures 27 cm.', grounded: false, flagged: ['cm'] },
  ])('$source → $answer', (c) => expectCase(c));
});

describe('days of the week abbreviated', () => {
  const HOURS = 'Opening hours are Monday to Friday from 8:00 to 20:00 and Saturday from 10:00 to 16:00.';
  it.each<Case>([
    { source: HOURS, answer: '| Day | Hours |\n|---|---|\n| Mon–Fri | 8:00–20:00 |\n| Sat | 10:00–16:00 |', grounded: true },
    { source: 'Story time is every Wed. at 15:30.', answer: 'Story time is every Wednesday at 3:30 pm.', grounded: true },
    { source: HOURS, answer: '| Day | Hours |\n|---|---|\n| Mon–Thu | 8:00–20:00 |\n| Sat–Sun | 10:00–16:00 |', grounded: false, flagged: ['Thu', 'Sun'] },
  ])('$answer', (c) => expectCase(c));
});

describe('codes in capitals that spell a French, German or Spanish function word', () => {
  it('"DE" in a tracking number is read as before, not as French "de"', () => {
    const sources = ['{"tracking_number": "PX-88231-DE", "estimated_delivery": "2024-06-13"}'];
    const r = checkGrounding({ sources, answer: 'Your parcel PX-88231-DE is expected to arrive on June 13, 2024.' });
    expect(r.claims[0]!.evidence!.score).toBeCloseTo(5 / 9, 3);
  });
});
