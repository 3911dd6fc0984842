import { describe, expect, it } from 'vitest';
import { checkGrounding } from './check.js';
import { jsonValuesText, MAX_JSON_ANSWER_CHARS } from './json-answer.js';

describe('jsonValuesText', () => {
  it.each([
    ['{"city":"Paris","year":1889}', ['Paris', '1889'], ['city', 'year']],
    ['[{"name": "Tōkyō 🗼", "tags": ["a\\"b", "c"]}, {"ok": true, "n": null, "x": -1.5e3}]', ['Tōkyō 🗼', 'c', '-1.5e3'], ['name', 'tags', 'ok', 'true', 'null']],
    ['  {\n  "k\\u0041": "v: {x}, [y]"\n}\n', ['v: {x}, [y]'], ['kA', 'k\\u0041']],
  ])('%s keeps its values at their offsets, and nothing else', (answer, values, gone) => {
    const text = jsonValuesText(answer)!;
    expect(text).toHaveLength(answer.length);
    for (const value of values) expect(text.slice(answer.indexOf(value), answer.indexOf(value) + value.length)).toBe(value);
    for (const word of gone) expect(text).not.toContain(word);
  });

  it.each(['Paris, 1889.', '"Paris"', '1889', '{"city": "Paris"', '{"a":1} and more', ''])('%j is not a JSON object or array: undefined', (answer) => {
    expect(jsonValuesText(answer)).toBeUndefined();
  });

  it('an answer over the limit is left alone (not parsed)', () => {
    const big = `{"a":"${'x'.repeat(MAX_JSON_ANSWER_CHARS)}"}`;
    expect(jsonValuesText(big)).toBeUndefined();
  });
});

const SENTIMENT = {
  type: 'object',
  properties: {
    sentiment: { type: 'string', enum: ['positive', 'neutral', 'negative'] },
    confidence: { type: 'number', description: '0 to 1' },
    is_spam: { type: 'boolean' },
  },
  required: ['sentiment', 'confidence', 'is_spam'],
  additionalProperties: false,
};
const COMPANY = {
  type: 'object',
  properties: { company: { type: 'string' }, founded: { type: 'integer' }, kind: { const: 'company' } },
};
// As zodResponseFormat sends one: a label defined once and referred to, nullable through anyOf.
const TICKETS = {
  type: 'object',
  properties: {
    tickets: { type: 'array', items: { $ref: '#/$defs/Ticket' } },
    tags: { type: 'array', items: { type: 'string', enum: ['billing', 'refund', 'login'] } },
    pair: { type: 'array', prefixItems: [{ enum: ['low', 'high'] }, { type: 'string' }] },
    labels: { type: 'object', additionalProperties: { enum: ['yes', 'no'] } },
  },
  $defs: {
    Ticket: {
      type: 'object',
      properties: {
        priority: { anyOf: [{ type: 'string', enum: ['low', 'high'] }, { type: 'null' }] },
        summary: { type: 'string' },
        relevanceScore: { type: 'number', minimum: 0, maximum: 1 },
        rating: { allOf: [{ enum: [1, 2, 3, 4, 5] }] },
      },
    },
  },
};

describe('jsonValuesText: escapes in a string value', () => {
  // answer, what the value reads as (same length as the answer's value text)
  it.each([
    ['{"summary": "It has a lake.\\nZürich is the largest city."}', 'It has a lake. \nZürich is the largest city.'],
    ['{"quote": "The mayor said \\"we grow\\"."}', 'The mayor said  "we grow ".'],
    ['{"path": "C:\\\\temp\\tx"}', 'C: \\temp  x'],
    // A \uXXXX escape is its character and a mark the reading of words drops (ESCAPE_FILLER): one word, same length.
    ['{"city": "Z\\u00fcrich"}', 'Zü\u034f\u034f\u034f\u034f\u034frich'],
    ['{"mood": "\\ud83d\\ude00 ok"}', '\ud83d\ude00           ok'],
    ['{"dash": "5\\u20136"}', '5\u2013     6'],
  ])('%s', (answer, read) => {
    const start = answer.indexOf(': "') + 3;
    const end = answer.lastIndexOf('"');
    expect(jsonValuesText(answer)!.slice(start, end)).toBe(read);
  });

  it('a summary with a line break in it is grounded sentence by sentence', () => {
    const answer = '{"summary": "It has a lake.\\nZürich is the largest city."}';
    const r = checkGrounding({ sources: ['Zürich is the largest city.\nIt has a lake.'], answer: jsonValuesText(answer)! });
    expect(r.claims.map((c) => answer.slice(c.start, c.end).trim())).toEqual(['It has a lake.', 'Zürich is the largest city.']);
    expect(r.grounded).toBe(true);
  });
});

describe('checkGrounding of a JSON answer written with \\uXXXX escapes (Python json.dumps, ensure_ascii)', () => {
  const SOURCES = [
    'The 2025 offsite takes place in Zürich, at Café Sprüngli on Bahnhofstrasse. The team lunch is at Brasserie Lipp.',
    '上海是中国最大的城市。会议在上海举行。',
  ];
  // answer, grounded, flagged (as written in the answer)
  it.each<[string, boolean, string[]]>([
    ['{"city": "Z\\u00fcrich", "venue": "Caf\\u00e9 Spr\\u00fcngli"}', true, []],
    ['{"city": "Z\\u00DCRICH", "year": 2025}', true, []],
    ['{"city": "\\u4e0a\\u6d77", "note": "\\u4f1a\\u8bae\\u5728\\u4e0a\\u6d77\\u4e3e\\u884c\\u3002"}', true, []],
    // A swapped detail is still flagged, its span the escapes as written.
    ['{"city": "Gen\\u00e8ve", "venue": "Caf\\u00e9 Spr\\u00fcngli"}', false, ['Gen\\u00e8ve']],
    ['{"city": "\\u5317\\u4eac"}', false, ['\\u5317\\u4eac']],
  ])('%s', (answer, grounded, flagged) => {
    const r = checkGrounding({ sources: SOURCES, answer: jsonValuesText(answer)! });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => answer.slice(s.start, s.end))).toEqual(flagged);
  });
});

describe('a source written with \\uXXXX escapes (a tool result from json.dumps) is read as its characters', () => {
  const TOOL = '{"offsite": {"city": "Z\\u00fcrich", "venue": "Caf\\u00e9 Spr\\u00fcngli", "note": "\\u4f1a\\u8bae\\u5728\\u4e0a\\u6d77\\u4e3e\\u884c\\u3002"}}';
  // answer, grounded, flagged
  it.each<[string, boolean, string[]]>([
    ['The offsite is in Zürich, at Café Sprüngli.', true, []],
    ['会议在上海举行。', true, []],
    ['The offsite is in Geneva, at Café Sprüngli.', false, ['Geneva']],
  ])('%s', (answer, grounded, flagged) => {
    const r = checkGrounding({ sources: [TOOL], answer });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
    // Evidence is still the source as written.
    for (const c of r.claims) if (c.evidence) expect(TOOL.slice(c.evidence.start, c.evidence.end)).toBe(c.evidence.text);
  });

  it('its line breaks end sentences: the evidence of a claim is its own sentence', () => {
    const tool = '{"summary": "Acme has 40 staff.\\nIt opened an office in Dayton in 2019.\\nIts CEO is \\"Ann Lee\\"."}';
    const r = checkGrounding({ sources: [tool], answer: 'Acme opened an office in Dayton in 2019. Its CEO is Ann Lee.' });
    expect(r.grounded).toBe(true);
    expect(r.claims[0]!.evidence!.text).toMatch(/Acme has 40 staff\.\\nIt opened an office in Dayton in 2019\.$/);
    expect(r.claims[1]!.evidence!.text).toMatch(/^Its CEO is /);
  });
});

describe('jsonValuesText with the schema the answer was asked to follow', () => {
  // answer, schema, values read (kept at their offsets), values not read (blanked)
  it.each<[string, object, string[], string[]]>([
    ['{"sentiment": "neutral", "confidence": 0.92, "is_spam": false}', SENTIMENT, [], ['neutral', '0.92', 'false']],
    ['{"company": "Acme", "founded": 1999, "kind": "company"}', COMPANY, ['Acme', '1999'], ['"company"}']],
    // A choice the schema does not list is the model's own: read.
    ['{"sentiment": "furious", "confidence": 0.5, "is_spam": true}', SENTIMENT, ['furious'], ['0.5']],
    // A judgement word but past 0..1, or a number not typed as one: a figure to check.
    ['{"sentiment": "neutral", "confidence": 92, "is_spam": false}', SENTIMENT, ['92'], ['neutral']],
    [
      '{"tickets": [{"priority": "high", "summary": "Refund of $40", "relevanceScore": 0.7, "rating": 4}, {"priority": null, "summary": "Login fails"}], "tags": ["refund", "invoices"], "pair": ["low", "later"], "labels": {"urgent": "yes"}}',
      TICKETS,
      ['Refund of $40', 'Login fails', 'invoices', 'later'],
      ['"high"', '0.7', ' 4}', '"refund"', '"low"', '"yes"', 'urgent'],
    ],
    // An array of judgements under a plural name; a figure under another name is checked.
    [
      '{"label_scores": [0.25, 0.75], "votes": [0.5]}',
      { properties: { label_scores: { type: 'array', items: { type: 'number' } }, votes: { type: 'array', items: { type: 'number' } } } },
      ['0.5'],
      ['0.25', '0.75'],
    ],
    // The same values with no schema: all read, as for `json_object`.
    ['{"sentiment": "neutral", "confidence": 0.92, "is_spam": false}', {}, ['neutral', '0.92'], ['false']],
  ])('%s', (answer, schema, read, blanked) => {
    const text = jsonValuesText(answer, schema)!;
    expect(text).toHaveLength(answer.length);
    for (const value of read) expect(text.slice(answer.indexOf(value), answer.indexOf(value) + value.length)).toBe(value);
    for (const value of blanked) expect(text.slice(answer.indexOf(value), answer.indexOf(value) + value.length).trim()).toBe('');
  });

  it('without a schema, the reading is the same as with one that constrains nothing', () => {
    const answer = '{"sentiment": "neutral", "confidence": 0.92, "is_spam": false, "n": [1, -2.5e3]}';
    expect(jsonValuesText(answer, { type: 'object' })).toBe(jsonValuesText(answer));
    expect(jsonValuesText(answer, 'not a schema')).toBe(jsonValuesText(answer));
  });

  it('a schema that refers to itself is followed a bounded number of times', () => {
    const tree = { $ref: '#/$defs/Node', $defs: { Node: { type: 'object', properties: { kind: { enum: ['leaf'] }, children: { type: 'array', items: { $ref: '#' } } }, anyOf: [{ $ref: '#/$defs/Node' }] } } };
    const text = jsonValuesText('{"kind": "leaf", "children": [{"kind": "leaf", "name": "x"}]}', tree)!;
    expect(text).not.toContain('leaf');
    expect(text).toContain('x');
  });
});

describe('checkGrounding of a structured answer read with its schema', () => {
  const REVIEW = 'Review: The delivery arrived on Tuesday. The box was intact.';
  const ACME = 'Acme is a tools maker. It was founded in 1999 in Ohio.';
  // sources, answer, schema, grounded, flagged
  it.each<[string, string, object | undefined, boolean, string[]]>([
    [REVIEW, '{"sentiment": "neutral", "confidence": 0.92, "is_spam": false}', SENTIMENT, true, []],
    [ACME, '{"company": "Acme", "founded": 1999}', COMPANY, true, []],
    [ACME, '{"company": "Acme", "founded": 1998}', COMPANY, false, ['1998']],
    [ACME, '{"company": "Acme", "founded": 1999, "kind": "company"}', COMPANY, true, []],
  ])('%s → %s', (source, answer, schema, grounded, flagged) => {
    const read = jsonValuesText(answer, schema)!;
    const r = checkGrounding({ sources: [source], answer: read });
    expect(r.grounded).toBe(grounded);
    expect(r.flaggedSpans.map((s) => answer.slice(s.start, s.end))).toEqual(flagged);
    for (const c of r.claims) expect(answer.slice(c.start, c.end).trim()).not.toBe('');
  });

  it('a classification read without its schema is flagged for its label and its confidence (as before)', () => {
    const r = checkGrounding({ sources: [REVIEW], answer: jsonValuesText('{"sentiment": "neutral", "confidence": 0.92, "is_spam": false}')! });
    expect(r.grounded).toBe(false);
  });
});

describe('jsonValuesText: a schema costs no more than its size', () => {
  it('branches that all refer back to the root are each followed once', () => {
    // Followed path by path, they double at each level: the check threw (call stack exceeded) or would not end.
    const schema = { anyOf: [{ $ref: '#' }, { $ref: '#' }], type: 'object', properties: { kind: { enum: ['leaf'] }, note: { type: 'string' } } };
    const text = jsonValuesText('{"kind": "leaf", "note": "Acme"}', schema)!;
    expect(text).not.toContain('leaf');
    expect(text).toContain('Acme');
  });
});

describe('jsonValuesText: a $ref that reaches nothing', () => {
  it('one with malformed percent-encoding, or naming a member of Object.prototype, is no schema: the answer is read as without one', () => {
    // decodeURIComponent threw a URIError out of the check; the chat request was answered 400 "The request URL is malformed".
    const answer = '{"city": "Paris", "kind": "leaf"}';
    for (const ref of ['#/%E0', '#/constructor', '#/__proto__', '#/properties/toString']) {
      const schema = { type: 'object', properties: { city: { $ref: ref }, kind: { $ref: ref } } };
      expect(jsonValuesText(answer, schema), ref).toBe(jsonValuesText(answer));
    }
  });
});
