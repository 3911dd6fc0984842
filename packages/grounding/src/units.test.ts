import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkGrounding } from './index.js';

const describeClaims = (r: ReturnType<typeof checkGrounding>) => JSON.stringify(r.claims.map((c) => [c.text, c.score]));

describe('numbers converted between units', () => {
  it.each([
    ['The upload was 2516582 bytes.', 'The upload was 2.4 MB.'],
    ['The upload was 2516582 bytes.', 'The upload was 2.5 MB.'],
    ['The upload was 2516582 bytes.', 'The upload was about 2 MB.'],
    ['The upload was 2516582 bytes.', 'The upload was 2457.6 KB.'],
    ['The upload was 2516582 bytes.', 'The upload was 2.4MB.'],
    ['The upload was 2516582 bytes.', 'The upload was 2.4 megabytes.'],
    ['The disk holds 3000 MB.', 'The disk holds 3 GB.'],
    ['{"file":"report.pdf","size_bytes":2516582}', 'The report is 2.4 MB.'],
    ['The request took 1530 ms.', 'The request took 1.5 seconds.'],
    ['The request took 1530 ms.', 'The request took 1.53 s.'],
    ['{"endpoint":"/auth","latency_ms":1530}', 'The auth endpoint took 1.5 seconds.'],
    ['The job ran for 90 seconds.', 'The job ran for 1.5 minutes.'],
    ['The timeout is 1.5 seconds.', 'The timeout is 1500 ms.'],
    ['Revenue was 57200 dollars.', 'Revenue was $57.2k.'],
    ['Revenue was 57200 dollars.', 'Revenue was 57.2 thousand dollars.'],
    ['Revenue was 57200 dollars.', 'Revenue was $57k.'],
    // A duration in two units is the one figure it adds up to, either way round.
    ['The flight from Oslo to Rome takes 2 hours 45 minutes.', 'The flight from Oslo to Rome takes 165 minutes.'],
    ['The flight from Oslo to Rome takes 2 hours 45 minutes.', 'The flight from Oslo to Rome takes 2.75 hours.'],
    ['The flight from Oslo to Rome takes 2 h 45.', 'The flight from Oslo to Rome takes 165 minutes.'],
    ['The flight from Oslo to Rome takes 2h45m.', 'The flight from Oslo to Rome takes 165 min.'],
    ['The flight from Oslo to Rome takes 165 minutes.', 'The flight from Oslo to Rome takes 2 hours and 45 minutes.'],
    ['The flight from Oslo to Rome takes 165 minutes.', 'The flight from Oslo to Rome takes 2 h 45.'],
    ['The flight from Oslo to Rome takes 165 minutes.', 'The flight from Oslo to Rome takes 2.75 hours.'],
    ['The battery lasts 90 minutes.', 'The battery lasts 1.5 hours.'],
    ['The cooldown is 3 min 20 s.', 'The cooldown is 200 seconds.'],
    ['Refunds are processed within 48 hours.', 'Refunds are processed within 2 days.'],
    ['The trial lasts 2 weeks.', 'The trial lasts 14 days.'],
    ['The trial lasts 1 week and 3 days.', 'The trial lasts 10 days.'],
    // A temperature on the other scale, rounded to the decimals written.
    ['The water in the pool is kept at 28 °C all year.', 'The water in the pool is kept at 82 °F all year.'],
    ['The water in the pool is kept at 28 °C all year.', 'The water in the pool is kept at 82.4°F all year.'],
    ['Bake the bread at 425 degrees Fahrenheit for 30 minutes.', 'Bake the bread at 218 °C for 30 minutes.'],
    ['Bake the bread at 218 °C for 30 minutes.', 'Bake the bread at 424 degrees Fahrenheit for 30 minutes.'],
    ['Lows reach -5 °C at night.', 'Lows reach 23 °F at night.'],
    // The signs ℃ and ℉ are °C and °F; kelvin is Celsius 273.15 on (the sign K, or the word).
    ['The oven is set to 220 ℃.', 'The oven is set to 428 °F.'],
    ['The oven is set to 220 °C.', 'The oven is set to 428℉.'],
    ['The oven is set to 220 ℃.', 'The oven is set to 220 °C.'],
    ['室温は25℃です。', '室温は77℉です。'],
    ['Water boils at 100 °C at sea level.', 'Water boils at 373.15 kelvin at sea level.'],
    ['Water boils at 100 °C at sea level.', 'Water boils at 373 \u212a at sea level.'],
    ['The sample was cooled to 77 kelvin.', 'The sample was cooled to -196 °C.'],
    ['Water boils at 100 °C at sea level.', 'Water boils at 373.15 K at sea level.'],
    ['Water boils at 373.15 K at sea level.', 'Water boils at 100 °C at sea level.'],
    ['The sample was cooled to 77 kelvins.', 'The sample was cooled to -321 degrees Fahrenheit.'],
  ])('%s → %s is grounded', (source, answer) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded, describeClaims(r)).toBe(true);
    expect(r.flaggedSpans).toEqual([]);
  });

  it.each([
    ['The upload was 2516582 bytes.', 'The upload was 2.9 MB.', '2.9'],
    ['The upload was 2516582 bytes.', 'The upload was 2.4 GB.', '2.4'],
    ['The upload was 2516582 bytes.', 'The upload was 2.45 MB.', '2.45'],
    ['The request took 1530 ms.', 'The request took 1.6 seconds.', '1.6'],
    ['The request took 1530 ms.', 'The request took 1.5 minutes.', '1.5'],
    ['The timeout is 1.5 seconds.', 'The timeout is 1530 ms.', '1530'],
    ['Revenue was 57200 dollars.', 'Revenue was $75.2k.', '75.2k'],
    ['Revenue was 57200 dollars.', 'Revenue was 57.3 thousand dollars.', '57.3 thousand'],
    // A number of another kind is not a size: 2516582 rows are not 2.4 MB.
    ['The table has 2516582 rows.', 'The table is 2.4 MB.', '2.4'],
    // A wrong conversion is still wrong.
    ['The flight from Oslo to Rome takes 2 hours 45 minutes.', 'The flight from Oslo to Rome takes 155 minutes.', '155'],
    ['The flight from Oslo to Rome takes 2 hours 45 minutes.', 'The flight from Oslo to Rome takes 3 hours 45 minutes.', '3 hours 45 minutes'],
    ['The flight from Oslo to Rome takes 165 minutes.', 'The flight from Oslo to Rome takes 2 hours 15 minutes.', '2 hours 15 minutes'],
    ['The flight from Oslo to Rome takes 165 minutes.', 'The flight from Oslo to Rome takes 2.5 hours.', '2.5'],
    ['The water in the pool is kept at 28 °C all year.', 'The water in the pool is kept at 86 °F all year.', '86'],
    ['Bake the bread at 425 degrees Fahrenheit for 30 minutes.', 'Bake the bread at 220 °C for 30 minutes.', '220'],
    ['Lows reach -5 °C at night.', 'Lows reach 41 °F at night.', '41'],
    ['Refunds are processed within 48 hours.', 'Refunds are processed within 3 days.', '3'],
    ['The oven is set to 220 ℃.', 'The oven is set to 450 °F.', '450'],
    ['The oven is set to 220 °C.', 'The oven is set to 450℉.', '450℉'],
    ['Water boils at 100 °C at sea level.', 'Water boils at 300 kelvin at sea level.', '300'],
    ['Water boils at 100 °C at sea level.', 'Water boils at 300 K at sea level.', '300 K'],
    ['The sample was cooled to 77 kelvin.', 'The sample was cooled to -150 °C.', '-150'],
    // A scale letter without "°" or "degrees" is no temperature.
    ['The water in the pool is kept at 28 °C all year.', 'The water in the pool is kept at 82 F all year.', '82'],
  ])('%s → %s is flagged at %s', (source, answer, span) => {
    const r = checkGrounding({ sources: [source], answer });
    expect(r.grounded, describeClaims(r)).toBe(false);
    expect(r.flaggedSpans.map((s) => s.text)).toContain(span);
  });
});

describe('numbers converted between units: properties', () => {
  const runs = { seed: 20261129, numRuns: 300 };
  const bytes = fc.integer({ min: 10_000, max: 2_000_000_000_000 });
  const unitOf = (n: number, size: number) => (size === 1e3 || size === 1024 ? 'KB' : size === 1e6 || size === 1024 ** 2 ? 'MB' : size === 1e9 || size === 1024 ** 3 ? 'GB' : 'TB');
  // A size in the largest unit that leaves at least 1, in the 1000s or the 1024s.
  const rendered = (n: number, binary: boolean, decimals: number) => {
    const sizes = binary ? [1024, 1024 ** 2, 1024 ** 3, 1024 ** 4] : [1e3, 1e6, 1e9, 1e12];
    const size = [...sizes].reverse().find((s) => n / s >= 1)!;
    return { value: n / size, size, text: `${(n / size).toFixed(decimals)} ${unitOf(n, size)}` };
  };

  it('a byte count written in KB, MB, GB or TB, rounded to any decimals, is grounded', () => {
    fc.assert(
      fc.property(bytes, fc.boolean(), fc.integer({ min: 0, max: 3 }), (n, binary, decimals) => {
        const { text } = rendered(n, binary, decimals);
        const r = checkGrounding({ sources: [`The backup file is ${n} bytes.`], answer: `The backup file is ${text}.` });
        expect(r.grounded, `${text}: ${describeClaims(r)}`).toBe(true);
      }),
      runs,
    );
  });

  it('a figure that rounds neither the 1000s nor the 1024s form is flagged', () => {
    fc.assert(
      fc.property(bytes, fc.boolean(), fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 50 }), fc.boolean(), (n, binary, decimals, off, up) => {
        const { value, size } = rendered(n, binary, decimals);
        const step = 10 ** -decimals;
        const wrong = Number((Math.round(value / step) * step + (up ? off : -off) * step).toFixed(decimals));
        fc.pre(wrong > 0);
        // Not a rounding of the same count in any unit of either system.
        const decimalSize = size < 1024 ? size : [1e3, 1e6, 1e9, 1e12][[1024, 1024 ** 2, 1024 ** 3, 1024 ** 4].indexOf(size)] ?? size;
        const binarySize = [1024, 1024 ** 2, 1024 ** 3, 1024 ** 4][[1e3, 1e6, 1e9, 1e12].indexOf(size)] ?? size;
        for (const s of [decimalSize, binarySize]) fc.pre(Math.abs(n / s - wrong) > step / 2 + 1e-9);
        const text = `${wrong.toFixed(decimals)} ${unitOf(n, size)}`;
        const r = checkGrounding({ sources: [`The backup file is ${n} bytes.`], answer: `The backup file is ${text}.` });
        expect(r.grounded, `${n} bytes as ${text}: ${describeClaims(r)}`).toBe(false);
      }),
      runs,
    );
  });
});
