import { describe, expect, it } from 'vitest';
import { splitClaims } from './claims.js';
import { checkGrounding, DEFAULT_GROUNDING_THRESHOLD, MAX_ANSWER_CHARS, MAX_SOURCE_CHARS, type GroundingInput, type GroundingResult } from './index.js';

// One row per signal: an input and what the check must say about it. `flagged` lists phrases that must be
// inside some flagged span (with `reason` containing the given text); `clean` means no span at all.

interface Row {
  name: string;
  input: GroundingInput;
  grounded: boolean;
  flagged?: { text: string; reason?: string }[];
  clean?: boolean;
}

const MILK = 'A gallon of milk costs $2.79 at the corner store.';
const REVENUE = 'Revenue grew 207% over the previous year.';
const BOEING = 'The Boeing 737 MAX 8 entered service in 2017.';
const GROSS = 'The film grossed $181,674,817 worldwide.';
const SIBLINGS = 'She has 2 brothers and a sister.';
const OBEROI = 'The Oberoi Group is a hotel company with its head office in Delhi.';
const OPENING = 'The film grossed over $50 million in its opening weekend.';
const APPLE = 'Apple is headquartered in Cupertino in the United States.';
const FESTIVAL = 'The festival takes place every August.';

const rows: Row[] = [
  // Numbers
  { name: 'a price copied', input: { sources: [MILK], answer: MILK }, grounded: true, clean: true },
  { name: 'a price changed ($3.79 vs $2.79)', input: { sources: [MILK], answer: 'A gallon of milk costs $3.79 at the corner store.' }, grounded: false, flagged: [{ text: '3.79', reason: '3.79' }] },
  { name: 'a percentage changed (307% vs 207%)', input: { sources: [REVENUE], answer: 'Revenue grew 307% over the previous year.' }, grounded: false, flagged: [{ text: '307', reason: '307' }] },
  { name: '"percent" for "%"', input: { sources: [REVENUE], answer: 'Revenue grew 207 percent over the previous year.' }, grounded: true, clean: true },
  { name: 'a model number changed (MAX 9 vs MAX 8)', input: { sources: [BOEING], answer: 'The Boeing 737 MAX 9 entered service in 2017.' }, grounded: false, flagged: [{ text: '9', reason: '9' }] },
  { name: 'a model number copied (MAX 8)', input: { sources: [BOEING], answer: BOEING }, grounded: true, clean: true },
  { name: 'a rounding ($181.7 million for 181,674,817)', input: { sources: [GROSS], answer: 'The film grossed $181.7 million worldwide.' }, grounded: true, clean: true },
  { name: 'not a rounding ($182.7 million for 181,674,817)', input: { sources: [GROSS], answer: 'The film grossed $182.7 million worldwide.' }, grounded: false, flagged: [{ text: '182.7', reason: '182.7' }] },
  { name: 'a number word for digits ("two" for 2)', input: { sources: [SIBLINGS], answer: 'She has two brothers and a sister.' }, grounded: true, clean: true },
  { name: 'digits for a number word (2 for "two")', input: { sources: ['She has two brothers and a sister.'], answer: SIBLINGS }, grounded: true, clean: true },
  { name: 'a wrong number word ("three" for 2)', input: { sources: [SIBLINGS], answer: 'She has three brothers and a sister.' }, grounded: false, flagged: [{ text: 'three', reason: 'three' }] },
  { name: 'a year changed (1925 for 1952)', input: { sources: ['The hotel opened in 1952.'], answer: 'The hotel opened in 1925.' }, grounded: false, flagged: [{ text: '1925', reason: '1925' }] },
  // Names
  { name: 'a name changed (Mumbai vs Delhi)', input: { sources: [OBEROI], answer: 'The Oberoi Group has its head office in Mumbai.' }, grounded: false, flagged: [{ text: 'Mumbai', reason: "'Mumbai' is not in the sources" }] },
  { name: 'the right name (Delhi)', input: { sources: [OBEROI], answer: 'The Oberoi Group has its head office in Delhi.' }, grounded: true, clean: true },
  { name: 'a month changed (March vs August)', input: { sources: [FESTIVAL], answer: 'The festival takes place every March.' }, grounded: false, flagged: [{ text: 'March', reason: 'March' }] },
  // Paraphrase
  { name: 'inflections (grossing for grossed)', input: { sources: [OPENING], answer: 'The film was grossing over $50 million in its opening weekend.' }, grounded: true, clean: true },
  { name: 'an acronym (US for United States)', input: { sources: [APPLE], answer: 'Apple is headquartered in Cupertino in the US.' }, grounded: true, clean: true },
  { name: 'a synonym of an acronym (USA for United States)', input: { sources: [APPLE], answer: 'Apple is headquartered in Cupertino, USA.' }, grounded: true, clean: true },
  // Question
  {
    name: "the question's words are not held against the answer",
    input: { sources: [FESTIVAL], question: 'When does the Edinburgh Fringe festival take place?', answer: 'The Edinburgh Fringe festival takes place every August.' },
    grounded: true,
    clean: true,
  },
  { name: 'without the question the same words are names no source has', input: { sources: [FESTIVAL], answer: 'The Edinburgh Fringe festival takes place every August.' }, grounded: false, flagged: [{ text: 'Edinburgh Fringe', reason: 'Edinburgh Fringe' }] },
  { name: 'a number from the question is not held against the answer', input: { sources: ['Tickets cost ten euros.'], question: 'Can 4 people go for 40 euros?', answer: 'Yes, 4 tickets cost 40 euros.' }, grounded: true, clean: true },
  // Chatter
  { name: 'greeting and offer of help only', input: { sources: [FESTIVAL], answer: 'Hi! I hope this helps. Let me know if you need anything else.' }, grounded: true, clean: true },
  { name: 'a hedge and a question back only', input: { sources: [FESTIVAL], answer: "I'm not sure. Is there anything else?" }, grounded: true, clean: true },
  { name: 'an opener before a copied sentence', input: { sources: [FESTIVAL], answer: `Sure, ${FESTIVAL}` }, grounded: true, clean: true },
  {
    name: 'pointing at the sources, then an interjection, before a copied sentence',
    input: { sources: [FESTIVAL], answer: `Based on the provided context, yeah, ${FESTIVAL}` },
    grounded: true,
    clean: true,
  },
  { name: 'the source named as the speaker', input: { sources: [FESTIVAL], answer: `The passage states that ${FESTIVAL}` }, grounded: true, clean: true },
];

function covers(r: GroundingResult, answer: string, text: string) {
  const at = answer.indexOf(text);
  expect(at, `${JSON.stringify(text)} is in the answer`).toBeGreaterThanOrEqual(0);
  return r.flaggedSpans.filter((s) => s.start <= at && at + text.length <= s.end);
}

describe('checkGrounding, one signal per row', () => {
  it.each(rows)('$name', ({ input, grounded, flagged, clean }) => {
    const r = checkGrounding(input);
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(grounded);
    expect(r.score >= DEFAULT_GROUNDING_THRESHOLD).toBe(grounded);
    if (clean) expect(r.flaggedSpans).toEqual([]);
    for (const f of flagged ?? []) {
      const spans = covers(r, input.answer, f.text);
      expect(spans.length, `a span covers ${JSON.stringify(f.text)}: ${JSON.stringify(r.flaggedSpans)}`).toBeGreaterThan(0);
      if (f.reason) expect(spans.some((s) => s.reason.includes(f.reason!)), JSON.stringify(spans)).toBe(true);
      for (const s of spans) expect(s.text).toBe(input.answer.slice(s.start, s.end));
    }
  });

  it('chatter alone makes no claim', () => {
    const r = checkGrounding({ sources: [FESTIVAL], answer: 'Hi! I hope this helps. Let me know if you need anything else.' });
    expect(r.claims).toEqual([]);
    expect(r.score).toBe(1);
  });
});

describe('claims', () => {
  it('a long answer copied from its source stays grounded however many sentences it has', () => {
    const f = 'The weather was mild and the market was busy. ';
    const r = checkGrounding({ sources: [f], answer: f.repeat(300) });
    expect(r.claims).toHaveLength(300);
    expect(r.grounded).toBe(true);
  });

  it.each([['Bananas.'], ['Otters juggle turquoise saxophones.']])('a claim no source shares a word with is flagged: %s', (claim) => {
    const e = 'The Eiffel Tower was completed in March 1889 and stands 330 metres tall in Paris.';
    expect(checkGrounding({ sources: [e], answer: claim }).grounded).toBe(false);
    expect(checkGrounding({ sources: [e], answer: `${e} ${claim}` }).grounded).toBe(false);
  });

  it.each([
    ['Dr. Smith moved to the U.S. in 1990.'],
    ['He met J. K. Rowling at 3:30 p.m. on Monday.'],
    ['Add 1 tsp. salt to the soup.'],
  ])('a full stop after an abbreviation or an initial ends no claim: %s', (sentence) => {
    const r = checkGrounding({ sources: [`Before that, nothing. ${sentence} After that, nothing.`], answer: sentence });
    expect(r.claims.map((c) => c.text)).toEqual([sentence]);
    expect(r.claims[0]!.evidence!.text).toBe(sentence);
  });

  it.each([
    ['1. **Point 1:** The battery lasts 8 to 10 hours at 20 °C.\n2. **Point 2:** Laptops weigh 1.4 kg.'],
    ['**The battery lasts 8 to 10 hours at 20 °C.** **Laptops weigh 1.4 kg.**'],
  ])("a unit's letter after a degree sign is no initial: its full stop ends the claim: %j", (answer) => {
    const sources = ['The battery lasts 8 to 10 hours at 20 °C. Laptops weigh 1.4 kg.'];
    const r = checkGrounding({ sources, answer });
    expect(r.claims.map((c) => c.text.replace(/\*/g, ''))).toEqual(['The battery lasts 8 to 10 hours at 20 °C.', 'Laptops weigh 1.4 kg.']);
    expect(r.grounded).toBe(true);
  });

  it.each([
    ['According to the document, the head office is in Mumbai.'],
    ['In the text, the head office is in Mumbai.'],
    ['Good question, the head office is in Mumbai.'],
    ["I'm not sure, but the head office is in Mumbai."],
    ['I hope this helps, the head office is in Mumbai.'],
  ])('an opener joined by a comma hides no claim: %s', (answer) => {
    const r = checkGrounding({ sources: [OBEROI], answer });
    expect(r.claims.map((c) => c.text)).toEqual(['the head office is in Mumbai.']);
    expect(r.grounded).toBe(false);
  });
});

const TOWER = 'The Eiffel Tower was completed in March 1889 and stands 330 metres tall in Paris.';
const DESIGN = 'It was designed by the engineering company of Gustave Eiffel.';

describe('answers as chat models write them', () => {
  it.each([
    ['a heading', `## Answer\n\n${TOWER}`],
    ['an emphasised label on its own line', `**Answer:**\n${TOWER}`],
    ['an emphasised label before the claim', `**Short answer:** ${TOWER}`],
    ['a lead-in to a list', `The main facts are:\n\n1. ${TOWER}\n2. ${DESIGN}`],
    ['"Here\'s what I found:"', `Here's what I found:\n\n- ${TOWER}\n- ${DESIGN}`],
    ['TL;DR', `TL;DR: ${TOWER}`],
    ['numbered citations', `${TOWER.slice(0, -1)} [1]. ${DESIGN.slice(0, -1)} [2][3].`],
    ['citations glued to the full stop', `${TOWER}[1] ${DESIGN}[^2]`],
    ['named citations', `${TOWER.slice(0, -1)} (Source 1). ${DESIGN}\u30103\u2020source\u3011`],
    ['list numbering with a parenthesis', `1) ${TOWER}\n2) ${DESIGN}`],
    ['a table', `| Fact | Detail |\n|---|---|\n| Completion | ${TOWER} |`],
    ['a sign-off and an offer', `${TOWER}\n\nLet me know if you want the full list of opening hours. Good luck with your trip!`],
    ['an apology before the claim', `Sorry for the confusion, ${TOWER.charAt(0).toLowerCase()}${TOWER.slice(1)}`],
    ['restating the question', `You asked when the tower was built. ${TOWER}`],
    ['a hedge', `It seems that ${TOWER.charAt(0).toLowerCase()}${TOWER.slice(1)}`],
    ['pointing at a numbered source', `According to Source 1, ${TOWER.charAt(0).toLowerCase()}${TOWER.slice(1)}`],
  ])('sentences copied under %s stay grounded, with nothing flagged', (_what, answer) => {
    const r = checkGrounding({ sources: [TOWER, DESIGN], answer });
    expect(r.grounded, JSON.stringify(r.claims.map((c) => [c.text, c.score]))).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
  });

  it.each([
    ['You\'re right!'],
    ['Apologies for the confusion!'],
    ['Happy to help further if needed.'],
    ['I\'m sorry, but I couldn\'t find that information in the provided documents.'],
    ['The provided context does not contain information about the Mona Lisa.'],
    ['There is no information about that in the context.'],
  ])('%s is not a claim', (answer) => {
    const r = checkGrounding({ sources: [TOWER], answer });
    expect(r.claims).toEqual([]);
    expect(r.grounded).toBe(true);
  });

  it.each([
    ['a heading over a numbered list in lower case', '## Hekla\n1. erupted in 1791\n2. located in northern Norway'],
    ['a list after a lead-in with a name', 'Key facts about Hekla\n1. erupted in 1791\n2. located in northern Norway'],
    ['agreeing with a false premise', 'You are right that Hekla erupted in 1791.'],
    ['a condition that is not an offer', 'If you have visited Hekla in 1791, the volcano erupted in 1845.'],
    ['"See" pointing at a fact, not at a link', 'See the 1791 eruption of Hekla, which lasted nine months.'],
    ['"sources" as a subject, not the context', 'Historical sources have no records of a second eruption in 1791.'],
    ['"could not determine" said of others', 'Police sources could not determine whether 4,000 people died in 1791.'],
  ])('%s is read as claims, and flagged', (_what, answer) => {
    const r = checkGrounding({ sources: ['Mount Hekla erupted in 1783 and again in 1845. It is located in southern Iceland.'], answer });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.length).toBeGreaterThan(0);
  });

  it('runs of white space are read in one pass: 400,000 spaces and tabs between two claims', () => {
    // Quadratic in a run's length, this would take minutes (a look-behind over the indent once did).
    const claims = splitClaims(`${TOWER}${' \t'.repeat(200_000)}${DESIGN}`);
    expect(claims).toHaveLength(2);
  });

  it('what follows a clause break after chatter is still a claim, and checked', () => {
    const r = checkGrounding({ sources: [TOWER], answer: 'Sorry for the confusion, the tower is in Berlin.' });
    expect(r.claims.map((c) => c.text)).toEqual(['the tower is in Berlin.']);
    expect(r.grounded).toBe(false);
  });

  it('an HTML list of copied sentences is grounded, its tags read as nothing', () => {
    const r = checkGrounding({ sources: [TOWER, DESIGN], answer: `<ol><li>${TOWER}</li><li>${DESIGN}</li></ol>` });
    expect(r.grounded).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
  });

  it.each([
    ['a soft hyphen inside a word', 'The international agreement was ratified.', 'The inter\u00adnational agreement was ratified.'],
    ['an acute accent for an apostrophe', "The drug isn't approved for children.", 'The drug isn\u00b4t approved for children.'],
  ])('%s reads as the word', (_what, source, answer) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
  });

  it('a sentence ends after "p.m." when a capitalised function word follows', () => {
    const r = checkGrounding({ sources: ['It opens at 9 a.m. and closes at 6 p.m. on weekdays.'], answer: 'It opens at 9 a.m. and closes at 6 p.m. It sells beer.' });
    expect(r.claims.map((c) => c.text)).toEqual(['It opens at 9 a.m. and closes at 6 p.m.', 'It sells beer.']);
  });

  it('a number outside brackets is still a number: a citation mark is only a bracketed one', () => {
    const r = checkGrounding({ sources: [TOWER], answer: 'The Eiffel Tower was completed in March 1887 [1].' });
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(['1887']);
  });

  it('a lead-in with a number or a name in it is a claim', () => {
    const r = checkGrounding({ sources: [TOWER], answer: 'The tower has four levels:\n- the ground floor' });
    expect(r.claims[0]!.text).toBe('The tower has four levels');
  });

  it('"Don\'t hesitate" is chatter only as an offer', () => {
    const r = checkGrounding({ sources: ['Do not open the door while the washing machine is draining.'], answer: "Don't hesitate to open the door while the washing machine is draining." });
    expect(r.claims).toHaveLength(1);
  });

  it('a bare number answering a question is a claim, not a list marker', () => {
    const r = checkGrounding({ sources: [TOWER], question: 'When was the Eiffel Tower completed?', answer: '1887.' });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(['1887']);
  });
});

describe('negation, word by word', () => {
  it.each([
    ['No injuries were reported, and the fire was contained by 6 p.m.', 'The fire was contained by 6 p.m.', 'The fire was not contained by 6 p.m.'],
    ['Venus is not the closest planet to the Sun, yet it is the hottest one.', 'Venus is the hottest planet.', 'Venus is not the hottest planet.'],
    ['The kids do not like spinach, but they eat broccoli happily.', 'The kids eat broccoli happily.', 'The kids do not eat broccoli happily.'],
    ['The museum is not open on Mondays and does not charge for entry.', 'The museum is not open on Mondays and does not charge for entry.', 'The museum is open on Mondays and does not charge for entry.'],
    ['The library does not lend reference books, and it closes at noon on Saturdays.', 'The library closes at noon on Saturdays.', 'The library does not close at noon on Saturdays.'],
  ])('against "%s", "%s" scores above "%s"', (source, faithful, flipped) => {
    const right = checkGrounding({ sources: [source], answer: faithful });
    const wrong = checkGrounding({ sources: [source], answer: flipped });
    expect(right.grounded).toBe(true);
    expect(wrong.score).toBeLessThan(right.score);
  });
});

describe('sources as they come', () => {
  it('a hard-wrapped source is read in sentences, not lines: a copied sentence is its own evidence', () => {
    const wrapped = 'The committee reviewed the proposal in detail and concluded that the new\nbridge across the river would cost approximately 42 million euros and take\nfour years to complete, with construction starting in 2026.\n\nThe vote is in May.';
    const sentence = wrapped.split('\n\n')[0]!.replace(/\n/g, ' ');
    const r = checkGrounding({ sources: [wrapped], answer: sentence });
    expect(r.grounded).toBe(true);
    expect(r.claims[0]!.evidence!.text).toBe(wrapped.split('\n\n')[0]);
  });

  it('paragraphs joined without a space are read as sentences: a copied sentence is its own evidence', () => {
    const joined = "Arthur's Magazine (1844–1846) was an American literary periodical published in Philadelphia in the 19th century.First for Women is a woman's magazine published by Bauer Media Group in the USA.";
    const answer = "First for Women is a woman's magazine published by Bauer Media Group in the USA.";
    const r = checkGrounding({ sources: [joined], answer });
    expect(r.grounded).toBe(true);
    expect(r.claims[0]!.evidence).toMatchObject({ start: joined.indexOf('First'), end: joined.length, text: answer });
  });

  it('of passages that hold a claim as well, the shortest is its evidence', () => {
    const r = checkGrounding({ sources: ['Paris is the capital of France and its largest city, with 2.1 million residents.', 'Paris is the capital of France.'], answer: 'Paris is the capital of France.' });
    expect(r.claims[0]!.evidence).toMatchObject({ source: 1, text: 'Paris is the capital of France.' });
  });

  it('an answer whose claims each pass but together fall short has its weakest claim flagged', () => {
    const input = { sources: ['Turnout was high this year. Voters queued for hours.'], answer: 'Turnout was high this year. Voters waited in queues for hours.' };
    const free = checkGrounding(input);
    const weakest = Math.min(...free.claims.map((c) => c.score));
    expect(free.score).toBeLessThan(weakest); // the other claim's shortfall lowers the answer below its weakest claim
    // A threshold between the two: every claim passes it, the answer does not.
    const r = checkGrounding(input, { threshold: (free.score + weakest) / 2 });
    expect(r.claims.every((c) => c.grounded)).toBe(true);
    expect(r.grounded).toBe(false);
    const flagged = r.claims.find((c) => c.score === weakest)!;
    expect(r.flaggedSpans.length).toBeGreaterThan(0);
    for (const span of r.flaggedSpans) expect(span.start >= flagged.start && span.end <= flagged.end).toBe(true);
  });
});

describe('names spelled as function words', () => {
  it.each([
    ['The company is headquartered in the UK.', 'The company is headquartered in the US.', 'US'],
    ['The UN declared the outbreak a global emergency in January 2020.', 'The WHO declared the outbreak a global emergency in January 2020.', 'WHO'],
    ['The plant is located in Austin, TX.', 'The plant is located in Austin, IN.', 'IN'],
    ['The Eiffel Tower was completed in March 1889.', 'The Eiffel Tower was completed in May 1889.', 'May'],
  ])('against "%s", "%s" flags %s, and the copy is grounded', (source, swapped, name) => {
    expect(checkGrounding({ sources: [source], answer: source }).grounded).toBe(true);
    const r = checkGrounding({ sources: [source], answer: swapped });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text)).toContain(name);
  });

  it('"US" for "United States" is found, in the same passage', () => {
    const r = checkGrounding({ sources: [APPLE], answer: 'Apple is headquartered in Cupertino in the US.' });
    expect(r.grounded).toBe(true);
    expect(r.claims[0]!.evidence!.score).toBe(1);
  });

  it('a sentence in capitals is shouting, not acronyms', () => {
    const r = checkGrounding({ sources: ['Kilauea is the most active of the five volcanoes.'], answer: 'KILAUEA IS THE MOST ACTIVE OF THE FIVE VOLCANOES.' });
    expect(r.grounded).toBe(true);
  });

  it('so is one whose only word beside "THE" is in a script without capitals, when the answer around it shouts', () => {
    const source = 'กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย The U.K. and the E.U. signed the agreement on Dec. 24, 2020.';
    const r = checkGrounding({ sources: [source], answer: source.toUpperCase() });
    expect(r.grounded, JSON.stringify(r.flaggedSpans)).toBe(true);
  });
});

describe('numbers', () => {
  it.each([
    ['$182 million', true],
    ['$181.7 million', true],
    ['$181 million', true],
    ['$190 million', false],
    ['$180 million', true],
  ])('against $181,674,817, "%s" is a rounding: %s', (amount, grounded) => {
    const r = checkGrounding({ sources: [GROSS], answer: `The film grossed ${amount} worldwide.` });
    expect(r.grounded).toBe(grounded);
  });

  it('a number and a scale word in the next paragraph are two claims, their spans apart', () => {
    const r = checkGrounding({ sources: ['The Eiffel Tower was completed in March 1889 and stands 330 metres tall in Paris.'], answer: '0\n\nb ' });
    expect(r.claims.map((c) => c.text)).toEqual(['0', 'b']);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(['0', 'b']);
  });

  it('"in the data centers" is a claim, not a pointer at the sources', () => {
    const r = checkGrounding({ sources: ['Servers run in the data centers of Dublin.'], answer: 'In the data centers of Dublin, servers run.' });
    expect(r.claims[0]!.text).toBe('In the data centers of Dublin, servers run.');
  });
});

describe('flagged phrases', () => {
  it('punctuation ends a phrase: names around a parenthesis are two spans', () => {
    const r = checkGrounding({ sources: ['The meeting is on Monday.'], answer: 'Set Alpha Beta (and Gamma Delta) first.' });
    const texts = r.flaggedSpans.map((s) => s.text);
    expect(texts).toContain('Alpha Beta');
    expect(texts).toContain('Gamma Delta');
    expect(texts.some((t) => t.includes('('))).toBe(false);
  });

  it('a number and a word in one token are one span with one reason ("10x", "w0"), not two marks side by side', () => {
    const r = checkGrounding({ sources: ['Sales grew fivefold in 2024 at Acme.'], answer: 'Sales grew 10x in 2024 at Acme.' });
    expect(r.flaggedSpans).toEqual([{ start: 11, end: 14, text: '10x', reason: "'10x' is not in the sources", score: 0 }]);
    const tokens = checkGrounding({ sources: ['The Eiffel Tower is in Paris.'], answer: 'w0 w1 w2' });
    expect(tokens.flaggedSpans.map((s) => s.text)).toEqual(['w0', 'w1', 'w2']);
  });
});

describe('sources that state nothing', () => {
  it.each([[['Hello']], [['Hi there!', 'Thanks!']], [['Who wrote Hamlet?']], [['Hello, what is 2+2?']]])(
    'are no sources: %j leaves the answer not checked, not flagged word by word',
    (sources) => {
      const r = checkGrounding({ sources, answer: 'Shakespeare wrote Hamlet in 1600 in London.' });
      expect(r).toMatchObject({ checked: false, grounded: true, score: 1, flaggedSpans: [], claims: [] });
    },
  );

  // A request states nothing either: grading a poem, a joke or a picture's description against "Write a poem about
  // the sea." flagged every sentence of it.
  it.each([
    [['Write a poem about the sea.']],
    [['Tell me a joke.']],
    [['Describe the picture.']],
    [['You are a helpful assistant.', 'Please write a haiku about autumn.']],
    [['Now translate it into French.']],
    [['Hi!', 'Come up with three names for a bakery.']],
    [['List the planets.']],
    [['Plan a trip to Rome for me.']],
    [['Review my essay, please.']],
    // A request wrapped onto a second line is still one request.
    [['Write a poem about the sea\nand the ships that sail on it.']],
    // The system message of most examples, and of most apps, before a question the model answers from memory.
    [['You are a helpful assistant.', 'Who wrote Hamlet?']],
    [['You are an expert chef. Answer concisely and never use jargon.', 'How long do I boil an egg?']],
  ])('requests are no sources: %j leaves the answer not checked', (sources) => {
    const r = checkGrounding({ sources, answer: 'The sea is wide and blue. Waves roll upon the shore at dawn.' });
    expect(r).toMatchObject({ checked: false, grounded: true, score: 1, flaggedSpans: [], claims: [] });
  });

  it.each([
    [['Summarize: the meeting is at 3 pm on Monday in room 4.']],
    [['Write a reply to this email.', 'The meeting is at 3 pm on Monday in room 4.']],
    [['The meeting is at 3 pm on Monday in room 4. Write a reminder.']],
    [['You are a helpful assistant.', 'The meeting is at 3 pm on Monday in room 4.']],
    // Statements whose first word is also a request verb ("plan", "review", "code").
    [['Plan Basic meets at 3 pm on Monday in room 4.', 'Compare the plans.']],
    [['Review meetings are at 3 pm on Monday in room 4.']],
    [['Show times: none.', 'Code 4 means the meeting is at 3 pm on Monday in room 4.']],
    // The material on the lines after a request with no colon, a line break being all that sets it apart.
    [['Summarize the notes below for the team\nthe meeting moved to 3 pm on Monday in room 4']],
    [['Review the schedule and flag any clashes\nday,time,room\nMonday,3 pm,4\nTuesday,10 am,2']],
    [['Compare the bookings and tell me which is later\n| day | time | room |\n|---|---|---|\n| Monday | 3 pm | 4 |']],
  ])('a request beside what it is about is checked against it: %j', (sources) => {
    const r = checkGrounding({ sources, answer: 'The meeting is at 5 pm on Friday in room 9.' });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(false);
  });

  it.each([
    'The train to Bristol leaves from platform 4 at 9:15 ¿Sabías que el mercado abre a las 8 de la mañana?',
    'กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย ¿Sabías que el mercado abre a las 8 de la mañana?',
  ])("a Spanish question opened by '¿' after a line with no end mark is a sentence of its own, not the line's end: %s", (source) => {
    const statement = source.slice(0, source.indexOf(' ¿'));
    const r = checkGrounding({ sources: [source], answer: statement });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(true);
    const other = checkGrounding({ sources: [source], answer: statement.replace(/Bristol|กรุงเทพมหานคร/, (w) => (w === 'Bristol' ? 'Valdoria' : 'เชียงใหม่')) });
    expect(other.checked).toBe(true);
    expect(other.score).toBeLessThan(r.score);
  });

  it('a question beside a source that states something is checked against it', () => {
    const r = checkGrounding({ sources: ['Who wrote Hamlet?', 'Hamlet was written by Marlowe.'], answer: 'Hamlet was written by Shakespeare in 1600.' });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(expect.arrayContaining([expect.stringContaining('Shakespeare')]));
  });

  it('a short source that states one fact is a source', () => {
    const r = checkGrounding({ sources: ['The tower is 330 metres tall.'], answer: 'The tower is 300 metres tall.' });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(false);
  });
});

describe('bounded work', () => {
  // Inputs built to make the passage search quadratic: every sentence of the sources and of the answer shares its
  // words. The check still answers (the CPU time is in docs/grounding.md; no timed assertion here).
  it.each([
    ['one-letter sentences', 'x. '.repeat(42_000), 'x. '.repeat(1_000)],
    ['a log of one repeated line', 'The server restarted at noon. '.repeat(4_400), 'The server restarted at noon. '.repeat(540)],
  ])('%s: answers, every claim checked', (_, source, answer) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(true);
    expect(r.claims.length).toBeGreaterThan(500);
  });
});

describe('negation', () => {
  const rows: [string, string, string][] = [
    ['adding "not"', 'The museum is open on Mondays.', 'The museum is not open on Mondays.'],
    ['dropping "not"', 'The museum is not open on Mondays.', 'The museum is open on Mondays.'],
    ['adding "never"', 'The bakery sells bread on Sundays.', 'The bakery never sells bread on Sundays.'],
    ["dropping \"n't\"", "The ferry doesn't run in winter.", 'The ferry does run in winter.'],
  ];
  it.each(rows)('%s lowers the score', (_, source, changed) => {
    const same = checkGrounding({ sources: [source], answer: source });
    const other = checkGrounding({ sources: [source], answer: changed });
    expect(other.score).toBeLessThan(same.score);
  });
});

describe('size bounds', () => {
  const filler = 'The weather was mild and the market was busy. ';
  const far = 'The lighthouse keeper was named Ingrid Solberg.';

  it(`sources past MAX_SOURCE_CHARS (${MAX_SOURCE_CHARS}) are cut, marked truncated, and what is past the bound supports nothing`, () => {
    const long = filler.repeat(Math.ceil(MAX_SOURCE_CHARS / filler.length)) + far;
    expect(long.length).toBeGreaterThan(MAX_SOURCE_CHARS);
    const r = checkGrounding({ sources: [long], answer: far });
    expect(r.truncated).toBe(true);
    expect(r.grounded).toBe(false);
    // The same fact in a second source past the bound is not read either.
    const two = checkGrounding({ sources: [filler.repeat(Math.ceil(MAX_SOURCE_CHARS / filler.length)), far], answer: far });
    expect(two.truncated).toBe(true);
    expect(two.grounded).toBe(false);
    // Within the bound it is read.
    const within = checkGrounding({ sources: [far, long], answer: far });
    expect(within.truncated).toBe(true);
    expect(within.grounded).toBe(true);
  });

  it(`an answer past MAX_ANSWER_CHARS (${MAX_ANSWER_CHARS}) is cut and marked truncated; its claims stay within the bound`, () => {
    // A few supported sentences, blank space up to exactly the bound, then one no source supports.
    const answer = filler.repeat(20).padEnd(MAX_ANSWER_CHARS, ' ') + 'The harbour froze in 1740.';
    expect(answer.length).toBeGreaterThan(MAX_ANSWER_CHARS);
    const r = checkGrounding({ sources: [filler], answer });
    expect(r.truncated).toBe(true);
    expect(r.grounded).toBe(true);
    for (const c of r.claims) expect(c.end).toBeLessThanOrEqual(MAX_ANSWER_CHARS);
    for (const s of r.flaggedSpans) expect(s.end).toBeLessThanOrEqual(MAX_ANSWER_CHARS);
  });

  it('inputs within the bounds are not marked truncated', () => {
    expect(checkGrounding({ sources: [filler], answer: filler }).truncated).toBeUndefined();
    expect(checkGrounding({ sources: ['x'.repeat(MAX_SOURCE_CHARS)], answer: 'y'.repeat(MAX_ANSWER_CHARS) }).truncated).toBeUndefined();
  });
});

describe('not checked', () => {
  it.each([
    ['no source', { sources: [], answer: 'The museum is open on Mondays.' }],
    ['only empty sources', { sources: ['', '  \n', '...'], answer: 'The museum is open on Mondays.' }],
    ['an empty answer', { sources: [FESTIVAL], answer: '' }],
    ['an answer without a letter or digit', { sources: [FESTIVAL], answer: ' ... 😀 !' }],
  ] as [string, GroundingInput][])('%s', (_, input) => {
    expect(checkGrounding(input)).toEqual({ checked: false, grounded: true, score: 1, flaggedSpans: [], claims: [] });
  });
});

describe('documented examples', () => {
  it("checkGrounding's JSDoc example", () => {
    const r = checkGrounding({
      sources: [OBEROI],
      question: 'Where is the head office of the Oberoi Group?',
      answer: 'The head office is in Mumbai.',
    });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(['Mumbai']);
    expect(r.claims[0]?.evidence?.text).toBe(OBEROI);
  });

  it("packages/grounding/README.md's example: not grounded, a score near 0, Mumbai flagged", () => {
    const answer = 'Mumbai, the financial capital of India.';
    const r = checkGrounding({ sources: [OBEROI], question: 'Where is the head office of the Oberoi Group?', answer });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(false);
    expect(r.score).toBeLessThan(0.1);
    expect(covers(r, answer, 'Mumbai').length).toBeGreaterThan(0);
    expect(covers(r, answer, 'India').length).toBeGreaterThan(0);
  });

  it("the root README's response example: 1925 and Mayor Dalton flagged with their reasons", () => {
    const r = checkGrounding({ sources: ['The museum was founded in 1901.'], answer: 'The museum was founded in 1925 by Mayor Dalton.' });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans).toEqual([
      { start: 26, end: 30, text: '1925', reason: 'number 1925 is not in the sources', score: 0 },
      { start: 34, end: 46, text: 'Mayor Dalton', reason: "'Mayor Dalton' is not in the sources", score: 0 },
    ]);
  });

  it('a wrong year alone is flagged at its offsets with its reason', () => {
    const r = checkGrounding({ sources: ['The hotel opened in 1952 and has 120 rooms.'], answer: 'The hotel opened in 1925.' });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans).toEqual([{ start: 20, end: 24, text: '1925', reason: 'number 1925 is not in the sources', score: 0 }]);
  });

  it("the root README's quick-start conversation: the source sentence answers the question", () => {
    const system = 'The library opens at 9 am and closes at noon on Saturdays.';
    const question = 'When does the library close on Saturdays?';
    const r = checkGrounding({ sources: [system, question], question, answer: system });
    expect(r.grounded).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
    expect(checkGrounding({ sources: [system, question], question, answer: 'The library closes at noon on Saturdays.' }).grounded).toBe(true);
    expect(checkGrounding({ sources: [system, question], question, answer: 'The library closes at 5 pm on Saturdays.' }).grounded).toBe(false);
  });
});

describe('conversation shapes apps send', () => {
  // A tool's CSV result: commas between digits separate values unless they group thousands ("1,430") or are a
  // decimal comma ("3,5"); "1430,57200" is two cells, not 1430.572.
  const CSV = 'region,units,revenue_usd\nNorth,1200,48000\nSouth,950,38000\nEast,1430,57200';
  const QUESTION = 'Which region sold the most units?';
  it.each([
    { answer: 'East: 1430 units, revenue 57200.', grounded: true, flagged: [] },
    { answer: 'North had 1200 units and 48000 revenue.', grounded: true, flagged: [] },
    { answer: 'South had 950 units.', grounded: true, flagged: [] },
    { answer: 'South had 590 units.', grounded: false, flagged: ['590'] },
    { answer: 'East had the most units: 1,340, with revenue of $57,200.', grounded: false, flagged: ['1,340'] },
  ])('CSV tool result: $answer', ({ answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [QUESTION, CSV], question: QUESTION, answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });

  // Fields of two or three digits read as one number: "York,275,119" was 275119 and "Leeds,312,41" 312.41.
  const SALES = 'city,units,returns\nYork,275,119\nLeeds,312,41';
  const SALES_NO_HEADER = 'York,275,119\nLeeds,312,41';
  const YEARS = 'year,units,returns\n2021,275,119\n2022,312,41';
  it.each([
    { source: SALES, answer: 'York had 275 units and 119 returns.', grounded: true, flagged: [] },
    { source: SALES_NO_HEADER, answer: 'Leeds: 312 units, 41 returns.', grounded: true, flagged: [] },
    { source: SALES, answer: 'York had 257 units and 119 returns.', grounded: false, flagged: ['257'] },
    { source: SALES, answer: 'Leeds: 312 units, 14 returns.', grounded: false, flagged: ['14'] },
    { source: YEARS, answer: 'In 2022 there were 312 units and 41 returns.', grounded: true, flagged: [] },
    { source: YEARS, answer: 'In 2022 there were 321 units and 41 returns.', grounded: false, flagged: ['321'] },
  ])('CSV fields of two or three digits: $answer', ({ source, answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });

  it.each([
    ['The rate is 3,5 %.', 'The rate is 3.5 %.'],
    ['In York, 1,200 people came.', 'In York, 1200 people came.'],
    ['Total: €1.200,50', 'The total is €1,200.50.'],
    ['Total: 1 200,50 €', 'The total is €1,200.50.'],
    ['Total: 1\u202f234\u202f567,5 €', 'The total is €1,234,567.50.'],
    ['It costs 12,99 euros.', 'It costs 12.99 euros.'],
    ['It has 1,234,567 rows.', 'It has 1234567 rows.'],
  ])('a decimal comma and grouped thousands are still one number: %s', (source, answer) => {
    expect(checkGrounding({ sources: [source], answer }).grounded).toBe(true);
  });

  it.each([
    ['Total: €1.200,50', 'The total is €1,250.50.', '1,250.50'],
    ['Total: 1 200,50 €', 'The total is €1,500.50.', '1,500.50'],
  ])('a European total changed is flagged: %s', (source, answer, flagged) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual([flagged]);
  });
});

describe('tool results restated in prose', () => {
  // A tool's JSON gives a share as a fraction of one; the answer writes it in percent.
  const WEATHER = '{"city": "Berlin", "temp_c": 18.6, "humidity": 0.72, "rain_chance": 0.05}';
  const QUESTION = 'How humid is it in Berlin?';
  it.each([
    { answer: 'Humidity in Berlin is 72%.', grounded: true, flagged: [] },
    { answer: 'Humidity in Berlin is 72 percent, with a 5% chance of rain.', grounded: true, flagged: [] },
    { answer: 'Humidity in Berlin is 27%.', grounded: false, flagged: ['27'] },
    { answer: 'Humidity in Berlin is 72%, with a 50% chance of rain.', grounded: false, flagged: ['50'] },
  ])('$answer', ({ answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [QUESTION, WEATHER], question: QUESTION, answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });
});

describe('times, durations and accounting figures restated', () => {
  const EVENT = '{"event": "evt_81", "created_at": "2024-03-15T14:30:00Z", "duration": "PT1H30M"}';
  it.each([
    { source: 'The meeting starts at 14:30.', answer: 'The meeting starts at 2:30 pm.', grounded: true, flagged: [] },
    { source: 'The meeting starts at 2:30 pm.', answer: 'The meeting starts at 14:30.', grounded: true, flagged: [] },
    { source: 'The meeting starts at 14:30.', answer: 'The meeting starts at 3:30 pm.', grounded: false, flagged: ['3'] },
    { source: 'The meeting starts at 14:30.', answer: 'The meeting starts at 14:45.', grounded: false, flagged: ['45'] },
    { source: EVENT, answer: 'Event evt_81 was created on March 15 at 2:30 pm UTC.', grounded: true, flagged: [] },
    { source: EVENT, answer: 'Event evt_81 was created on March 15 at 4:30 pm UTC.', grounded: false, flagged: ['4'] },
    { source: EVENT, answer: 'The duration of event evt_81 is 90 minutes.', grounded: true, flagged: [] },
    { source: EVENT, answer: 'The duration of event evt_81 is 1.5 hours.', grounded: true, flagged: [] },
    { source: EVENT, answer: 'The duration of event evt_81 is 80 minutes.', grounded: false, flagged: ['80'] },
    { source: 'Net income: (1,200)', answer: 'Net income was -1,200.', grounded: true, flagged: [] },
    { source: 'Net income: (1,200)', answer: 'Net income was -2,100.', grounded: false, flagged: ['-2,100'] },
  ])('$source → $answer', ({ source, answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });
});

describe('a table whose header gives the scale', () => {
  const TABLE = '| Region | Revenue ($M) | Staff |\n|---|---|---|\n| East | 12.5 | 40 |\n| West | 8.1 | 25 |';
  it.each([
    { answer: 'East had revenue of $12,500,000.', grounded: true, flagged: [] },
    { answer: 'East had revenue of $12.5 million.', grounded: true, flagged: [] },
    { answer: 'East had revenue of $21,500,000.', grounded: false, flagged: ['21,500,000'] },
    { answer: 'West had 25,000,000 staff.', grounded: false, flagged: ['25,000,000'] },
  ])('$answer', ({ answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [TABLE], answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });
});

describe('table rows are records', () => {
  const PLANS = 'Our plans:\n\n| Plan | Price | Seats |\n|---|---|---|\n| Basic | $25 | 1 |\n| Team | $40 | 5 |\n| Business | $90 | 20 |';
  it("a row's evidence is that row, never two rows: a price swapped between rows is not backed by both together", () => {
    const copied = checkGrounding({ sources: [PLANS], answer: '| Plan | Price |\n|---|---|\n| Team | $40 |' });
    const swapped = checkGrounding({ sources: [PLANS], answer: '| Plan | Price |\n|---|---|\n| Team | $90 |' });
    expect(copied.claims.map((c) => c.evidence?.text)).toEqual(['Team | $40 | 5']);
    expect(swapped.claims[0]!.evidence!.text.split('\n')).toHaveLength(1);
    expect(swapped.score).toBeLessThan(copied.score);
  });
});

describe('currency codes and symbols restated', () => {
  it.each([
    { source: 'The price is $1,200.', answer: 'The price is USD 1,200.', grounded: true, flagged: [] },
    { source: 'The price is USD 1,200.', answer: 'The price is 1,200 US dollars.', grounded: true, flagged: [] },
    { source: 'The price is £1,200.', answer: 'The price is GBP 1,200.', grounded: true, flagged: [] },
    { source: 'The price is $1,200.', answer: 'The price is USD 1,500.', grounded: false, flagged: ['1,500'] },
    { source: 'The price is $1,200.', answer: 'The price is EUR 1,200.', grounded: false, flagged: ['EUR'] },
    // A currency's words are its symbol and code, either way round; another currency's word is flagged.
    { source: 'The ticket costs $12.', answer: 'The ticket costs 12 dollars.', grounded: true, flagged: [] },
    { source: 'The ticket costs $12.', answer: 'The ticket costs twelve dollars.', grounded: true, flagged: [] },
    { source: 'The ticket costs 12 dollars.', answer: 'The ticket costs $12.', grounded: true, flagged: [] },
    { source: 'The ticket costs €12.', answer: 'The ticket costs 12 euros.', grounded: true, flagged: [] },
    { source: 'The ticket costs 12 euros.', answer: 'The ticket costs EUR 12.', grounded: true, flagged: [] },
    { source: 'The ticket costs £12.', answer: 'The ticket costs 12 pounds.', grounded: true, flagged: [] },
    { source: 'The ticket costs 12 GBP.', answer: 'The ticket costs £12.', grounded: true, flagged: [] },
    { source: 'The ticket costs ¥1200.', answer: 'The ticket costs 1200 yen.', grounded: true, flagged: [] },
    { source: 'The ticket costs 1200 yen.', answer: 'The ticket costs JPY 1200.', grounded: true, flagged: [] },
    { source: 'The ticket costs $12.', answer: 'The ticket costs 12 euros.', grounded: false, flagged: ['euros'] },
    { source: 'The ticket costs 12 euros.', answer: 'The ticket costs $12.', grounded: false, flagged: ['$'] },
    { source: 'The ticket costs £12.', answer: 'The ticket costs 12 yen.', grounded: false, flagged: ['yen'] },
  ])('$source → $answer', ({ source, answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });

  it('a currency restated in words scores as the same currency restated as its code', () => {
    const score = (answer: string) => checkGrounding({ sources: ['The ticket costs $12.'], answer }).score;
    expect(score('The ticket costs 12 dollars.')).toBe(score('The ticket costs 12 USD.'));
    expect(score('The ticket costs 12 euros.')).toBeLessThan(score('The ticket costs 12 USD.'));
  });
});

describe('an ISO date\'s month is checked as a month, not as a bare number', () => {
  it.each([
    { source: 'The store opened in March 2024.', answer: 'The store opened in 2024-03.', grounded: true, flagged: [] },
    { source: 'The store opened in 2024-03.', answer: 'The store opened in March 2024.', grounded: true, flagged: [] },
    { source: 'The store opened in March of 2024.', answer: 'The store opened in 2024-03.', grounded: true, flagged: [] },
    { source: 'The store opened on 15 March 2024.', answer: 'The store opened on 2024-03-15.', grounded: true, flagged: [] },
    { source: 'The store opened on 2024-03-15.', answer: 'The store opened in March 2024.', grounded: true, flagged: [] },
    { source: 'The store opened on 15 April 2024.', answer: 'The store opened on 2024-03-15.', grounded: false, flagged: ['03'] },
    // A bare 3 is no March.
    { source: 'The store opened 3 branches in 2024.', answer: 'The store opened in 2024-03.', grounded: false, flagged: ['03'] },
    // "2011-12" may be a season: its second half is still read as a number too.
    { source: 'The 2011-12 season was his best.', answer: 'The 2011-12 season was his best.', grounded: true, flagged: [] },
    // A month named in a source is no bare number: "June 1900" backs neither a day of August nor a count.
    { source: 'It reached 41.2 °C on 3 August. The bakery opened in June 1900.', answer: 'It reached 41.2 °C on 6 August.', grounded: false, flagged: ['6'] },
    // A date in digits still restates a named month, read either way round.
    { source: 'The store reopened on 3 April 2022.', answer: 'The store reopened on 03/04/2022.', grounded: true, flagged: [] },
    { source: 'The store reopened on 3 April 2022.', answer: 'The store reopened on 04/03/2022.', grounded: true, flagged: [] },
  ])('$source → $answer', ({ source, answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });

  it('says the unsupported figure is a date\'s month', () => {
    const r = checkGrounding({ sources: ['The store opened in 2024.'], answer: 'The store opened in 2024-03.' });
    expect(r.flaggedSpans).toMatchObject([{ text: '03', reason: "the date's month 03 is not in the sources" }]);
  });
});

describe('translations: only their numbers are checked', () => {
  const NOTICE = 'Translate the following text into German:\n\nOur office is closed on public holidays. Please contact support@acme.dev for urgent issues.';
  const BUDGET = 'Translate into Spanish: The budget allocates $4.2 million to road repairs and $1.1 million to parks.';
  const ROOM = 'Translate to Japanese: The meeting is at 3 pm in room 4.';
  it.each([
    { request: NOTICE, answer: 'Unser Büro ist an Feiertagen geschlossen. Bitte wenden Sie sich bei dringenden Problemen an support@acme.dev.', grounded: true, flagged: [] },
    { request: BUDGET, answer: 'El presupuesto asigna 4,2 millones de dólares a la reparación de carreteras y 1,1 millones a parques.', grounded: true, flagged: [] },
    { request: ROOM, answer: '会議は午後3時に4号室で行われます。', grounded: true, flagged: [] },
    // A wrong number in a translation is still flagged, and only it.
    { request: BUDGET, answer: 'El presupuesto asigna 5,2 millones de dólares a la reparación de carreteras y 1,1 millones a parques.', grounded: false, flagged: ['5,2'] },
    { request: ROOM, answer: '会議は午後3時に9号室で行われます。', grounded: false, flagged: ['9'] },
    // An English answer to a request to translate is no translation: checked word by word.
    { request: ROOM, answer: 'The meeting was cancelled because of heavy rain.', grounded: false },
  ])('$answer', ({ request, answer, grounded, flagged }) => {
    const r = checkGrounding({ sources: [request], question: request, answer });
    expect(r.grounded).toBe(grounded);
    if (flagged) expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
  });

  it('an answer in another language to a question that asks for no translation is checked word by word', () => {
    const source = 'Our office is closed on public holidays.';
    const r = checkGrounding({ sources: [source, 'When is the office closed?'], question: 'When is the office closed?', answer: 'Unser Büro ist sonntags geöffnet.' });
    expect(r.grounded).toBe(false);
  });
});

describe('text as documentation on disk writes it', () => {
  it('a source that is only a title ("# acme-sync") is a document: an answer it does not support is checked and flagged', () => {
    const r = checkGrounding({ sources: ['# acme-sync'], answer: 'Acme-sync is written in Rust and runs on Windows.' });
    expect(r.checked).toBe(true);
    expect(r.grounded).toBe(false);
    // So removing the paragraph under the title never raises the score of an answer copied from it.
    const both = checkGrounding({ sources: ['# acme-sync', 'Acme-sync is written in Rust and runs on Windows.'], answer: 'Acme-sync is written in Rust and runs on Windows.' });
    expect(r.score).toBeLessThanOrEqual(both.score);
  });

  it('a title beside a request is still no source to check against', () => {
    const r = checkGrounding({ sources: ['# Instructions\nYou are a helpful assistant.'], answer: 'The sea is wide and blue.' });
    expect(r.checked).toBe(false);
  });

  it.each([
    // A comment that ends a sentence.
    ['# Keep at most 20 connections per host.\n# Set it to 0 to turn the limit off.\nmax_connections 20', '20', '50'],
    // A sentence that ends inside the comment line and another that goes on.
    ['# The cache holds 64 entries. Older ones are dropped first.\ncache_size 64', '64', '96'],
    // A comment wrapped over two lines, in lower case after the marks.
    ['# The worker retries a failed upload 3 times\n# before it gives up and logs the error.\nretries 3', '3', '8'],
    // A line of a comment block with a comment's blank line ("#") beside it, and a block indented with tabs.
    ['# Connections wait in a queue when all are busy.\n#\n# Example: queue_size 128\n#queue_size 64', '128', '256'],
    ['#\tA failed job is retried up to 5 times\n#\t   before the worker gives up.\nretries=5', '5', '9'],
  ])("comment lines copied from a configuration file are claims, not headings: %j", (source, from, to) => {
    const comment = source.split('\n').filter((l) => l.startsWith('#')).join('\n');
    expect(checkGrounding({ sources: [source], answer: comment }).grounded).toBe(true);
    const changed = checkGrounding({ sources: [source], answer: comment.replace(from, to) });
    expect(changed.grounded).toBe(false);
    expect(changed.flaggedSpans.map((s) => s.text)).toContain(to);
  });

  it('a heading stays a heading: a title over a paragraph is no claim', () => {
    const r = checkGrounding({ sources: ['The app listens on port 8080.'], answer: '## Getting started\nThe app listens on port 8080.' });
    expect(r.claims.map((c) => c.text)).toEqual(['The app listens on port 8080.']);
    expect(r.grounded).toBe(true);
  });
});

describe('numbers as changelogs and logs write them', () => {
  it.each([
    // A date written with dots, as much of Europe writes it.
    ['The lease ends on 30.06.2027.', 'The lease ends on 30.06.2027.', 'The lease ends on 30.06.2028.', '2028'],
    ['The lease ends on 30.06.2027.', 'The lease ends on 30.06.2027.', 'The lease ends on 29.06.2027.', '29'],
    // A version whose last part has four digits is no date ("4.1.3307").
    ['Build 4.1.3307 fixes the crash on start.', 'Build 4.1.3307 fixes the crash on start.', 'Build 4.1.3308 fixes the crash on start.', '4.1.3308'],
    // The seconds of a time are as much a number as its minutes.
    ['The job finished at 23:14:07 on Sunday.', 'The job finished at 23:14:07 on Sunday.', 'The job finished at 23:14:52 on Sunday.', '52'],
  ])('%j: a copy is grounded, a changed figure is flagged', (source, copy, changed, flagged) => {
    expect(checkGrounding({ sources: [source], answer: copy }).grounded).toBe(true);
    const r = checkGrounding({ sources: [source], answer: changed });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text)).toContain(flagged);
  });

  it('a dotted date and the same date in words support each other', () => {
    expect(checkGrounding({ sources: ['The lease ends on 30 June 2027.'], answer: 'The lease ends on 30.06.2027.' }).grounded).toBe(true);
    expect(checkGrounding({ sources: ['The lease ends on 30.06.2027.'], answer: 'The lease ends on 30 June 2027.' }).grounded).toBe(true);
    expect(checkGrounding({ sources: ['The lease ends on 30.06.2027.'], answer: 'The lease ends on 30 July 2027.' }).grounded).toBe(false);
  });

  it('a "?" in an aside before the full stop leaves the sentence a statement to check', () => {
    const r = checkGrounding({ sources: ['The library opens at 9 am.'], answer: 'The library opens at 9 am. Parking costs £4 per hour (or was it £5?).' });
    expect(r.grounded).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text).join(' ')).toContain('Parking');
  });
});
