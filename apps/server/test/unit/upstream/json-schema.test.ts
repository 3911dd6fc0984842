import { describe, expect, it } from 'vitest';
import { checkablePattern, sampleFromSchema, SchemaBoundsError, validateJsonSchema } from '../../../src/upstream/json-schema.js';

const hints = (question: string) => ({ question, names: [], numbers: [], keywords: [] });

describe('checkablePattern', () => {
  it.each([['^(a+)+$'], ['(a|a)*b'], ['^(\\w+\\s?)*$'], ['((ab)*c)+'], ['(x+x+)+y'], ['(a{1,}){2,}'], ['(a)\\1'], ['(?=a)a+'], ['(?<!b)a']])(
    'marks a pattern without a polynomial bound (nested repeats, look-arounds, back-references) as always time-boxed: %s',
    (pattern) => {
      expect(checkablePattern(pattern)).toMatchObject({ unbounded: true });
    },
  );

  it.each([
    ['^[a-z]+$', 1],
    ['^\\d{3}-\\d{4}$', 0],
    ['^(foo|bar)$', 1],
    ['^[A-Z]{2}(\\d{2})?$', 1],
    ['^(\\+|-)?\\d+$', 3],
    ['[(a+)+]', 0],
    ['x*x*x*x*y', 4],
  ])('counts the choices a matcher can backtrack into: %s → %i', (pattern, choices) => {
    expect(checkablePattern(pattern)).toMatchObject({ unbounded: false, choices });
  });

  it('leaves an invalid pattern unchecked', () => {
    expect(checkablePattern('(')).toBeNull();
  });
});

/** The filler under hostile schemas: each of these stalled the event loop for seconds to minutes. */
describe('sampleFromSchema within its time bounds', () => {
  const timed = (schema: unknown, question = 'Look it up.') => {
    const start = performance.now();
    let value: unknown;
    let error: unknown;
    try {
      value = sampleFromSchema(schema, hints(question));
    } catch (err) {
      error = err;
    }
    return { value, error, ms: performance.now() - start };
  };

  // Polynomial backtracking: each adjacent quantifier multiplies the paths by the string's length.
  it.each([
    ['a long string required', { type: 'object', properties: { x: { type: 'string', minLength: 400, pattern: 'x*x*x*x*y' } }, required: ['x'] }, 'hi'],
    ['a long word in the question', { type: 'object', properties: { q: { type: 'string', pattern: 'x*x*x*x*x*y' } }, required: ['q'] }, `${'x'.repeat(300)} `.repeat(50)],
    ['exponential, on a crafted word', { type: 'object', properties: { q: { type: 'string', pattern: '^(a+)+$' } }, required: ['q'] }, `Look up ${'a'.repeat(40)}b please.`],
  ])('a pattern that backtracks (%s) costs at most the pattern budget, and what it returns is valid', (_what, schema, question) => {
    const { value, error, ms } = timed(schema, question);
    // The budget is 30 ms; the bound only tells it from what it was (37 s, or never), whatever else the host runs.
    expect(ms).toBeLessThan(10_000);
    if (error === undefined) expect(validateJsonSchema(schema, value)).toEqual([]);
    else expect(error).toBeInstanceOf(SchemaBoundsError);
  });

  it('a fill given up because a pattern test was cut off says so, not that no valid value exists', () => {
    // The question's word "aaa…abz" backtracks past the test's time limit; the strings written from the pattern
    // (its look-ahead unwritten) fail at once. Whether any value fits was not found out in time.
    const schema = { type: 'object', properties: { q: { type: 'string', pattern: '^(?=.*z)(a+)+$' } }, required: ['q'] };
    const { error } = timed(schema, `Look up ${'a'.repeat(40)}bz please.`);
    expect(error).toBeInstanceOf(SchemaBoundsError);
    expect((error as Error).message).toMatch(/testing strings against its pattern "\^\(\?=\.\*z\)\(a\+\)\+\$" takes more than \d+ ms/);
  });

  it('an enum of 20,000 values in each of 1,000 items is one pass over the values, not a RegExp per value per item', () => {
    const values = Array.from({ length: 20_000 }, (_, i) => `v${i}`);
    const schema = { type: 'object', properties: { a: { type: 'array', minItems: 1000, items: { enum: values } } }, required: ['a'] };
    const { value, error } = timed(schema, 'Pick v7 for me.');
    expect(error).toBeUndefined();
    expect((value as { a: string[] }).a).toEqual(Array(1000).fill('v7'));
  });

  it('an enum past the step budget is refused, not run', () => {
    const { error } = timed({ enum: Array.from({ length: 3_000_000 }, (_, i) => i) });
    expect(error).toBeInstanceOf(SchemaBoundsError);
    expect((error as Error).message).toMatch(/more than 200000 steps/);
  });
});

describe('sampleFromSchema writes only valid values', () => {
  it.each<[string, Record<string, unknown>]>([
    ['unique objects', { type: 'array', minItems: 3, uniqueItems: true, items: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] } }],
    ['unique numbers', { type: 'array', minItems: 5, uniqueItems: true, items: { type: 'integer', minimum: 1 } }],
    ['minProperties above the declared ones', { type: 'object', minProperties: 3 }],
    ['minProperties with typed additional properties', { type: 'object', properties: { a: { type: 'string' } }, minProperties: 2, additionalProperties: { type: 'integer' } }],
    ['a pattern no word of the question matches', { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{3}-\\d{4}$' } }, required: ['code'] }],
    ['a pattern with a length range', { type: 'string', pattern: '^[a-f0-9]+$', minLength: 12, maxLength: 12 }],
    ['patterned unique items', { type: 'array', minItems: 3, uniqueItems: true, items: { type: 'string', pattern: '^[A-Z]{2}\\d{2}$' } }],
    ['a recursive tree', { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } }, required: ['name', 'children'] }],
  ])('%s', (_what, schema) => {
    const value = sampleFromSchema(schema, hints('Weather in Paris?'));
    expect(validateJsonSchema(schema, value)).toEqual([]);
  });

  it('a schema with no value within reach is refused, saying why, rather than answered with an invalid value', () => {
    expect(() => sampleFromSchema({ type: 'array', minItems: 4, uniqueItems: true, items: { enum: ['a', 'b'] } }, hints('hi'))).toThrow(
      /no value it can write is valid against it \(\$: must have unique items\)/,
    );
    expect(() => sampleFromSchema({ type: 'object', minProperties: 2, additionalProperties: false }, hints('hi'))).toThrow(SchemaBoundsError);
  });

  it('a value the question names is chosen from an enum, as a word or a phrase, not inside another word', () => {
    const schema = { type: 'object', properties: { unit: { enum: ['celsius', 'fahrenheit'] }, city: { enum: ['New York', 'York'] } }, required: ['unit', 'city'] };
    expect(sampleFromSchema(schema, hints('Weather in New York in Fahrenheit?'))).toEqual({ unit: 'fahrenheit', city: 'New York' });
    expect(sampleFromSchema({ enum: ['cat', 'dog'] }, hints('Is a category a dog?'))).toBe('dog');
  });
});

describe('numbers from the question and the answer', () => {
  it('a field takes the number a word of its name stands beside, a field named by none the one no other field names', () => {
    const schema = { type: 'object', properties: { height_m: { type: 'integer' }, completedYear: { type: 'integer' } }, required: ['height_m', 'completedYear'] };
    const value = sampleFromSchema(schema, { ...hints('When?'), numbers: [1889, 330], numberWords: [['was', 'completed', 'in', 'and', 'is'], ['in', 'and', 'is', 'metres', 'tall']] });
    expect(value).toEqual({ height_m: 330, completedYear: 1889 });
    // Without words beside them, in order.
    expect(sampleFromSchema(schema, { ...hints('When?'), numbers: [1889, 330] })).toEqual({ height_m: 1889, completedYear: 330 });
  });
});

/** Property names that are also members of Object.prototype, as a client's JSON can name them. */
describe('property names of Object.prototype (__proto__, constructor, toString)', () => {
  const schema = JSON.parse(
    '{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"string"}},' +
      '"required":["__proto__","constructor","toString","hasOwnProperty"],"additionalProperties":{"type":"integer"}}',
  ) as Record<string, unknown>;

  it('are written as the object own properties that a strict schema requires', () => {
    const value = sampleFromSchema(schema, hints('Look it up.'));
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(JSON.parse(JSON.stringify(value)) as object).sort()).toEqual(['__proto__', 'constructor', 'hasOwnProperty', 'toString']);
    expect(validateJsonSchema(schema, JSON.parse(JSON.stringify(value)))).toEqual([]);
  });

  it('are missing from a value that only inherits them, and unexpected where no property allows them', () => {
    expect(validateJsonSchema({ type: 'object', required: ['toString', '__proto__'] }, {})).toEqual([
      '$: missing required property toString',
      '$: missing required property __proto__',
    ]);
    expect(validateJsonSchema({ type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false }, JSON.parse('{"constructor":1}'))).toEqual([
      '$: unexpected property constructor',
    ]);
  });

  it('a $ref reaches the schema own members only, and one with malformed percent-encoding reaches nothing, as an unknown one', () => {
    const refs = { type: 'object', properties: { a: { $ref: '#/constructor' }, b: { $ref: '#/properties/%E0' } }, required: ['a', 'b'], additionalProperties: false };
    expect(validateJsonSchema(refs, { a: 1, b: 'x' })).toEqual([]);
    expect(sampleFromSchema(refs, hints('hi'))).toMatchObject({ a: expect.anything(), b: expect.anything() });
  });
});
