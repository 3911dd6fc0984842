import { describe, expect, it } from 'vitest';
import { createOfflineGrounder } from '../../../src/chat/grounder.js';

// What the offline grounder says of answers applications get: structured outputs built from a document, and
// multi-turn chats whose facts come from tool results. Spans are offsets into the answer as sent.

const grounder = createOfflineGrounder({ thread: null });
const check = (messages: unknown[], answer: string) => grounder.check({ messages, answer, requested: true });
const spans = (svc: { flagged_spans: { start: number; end: number; text: string }[] }, answer: string) =>
  svc.flagged_spans.map((s) => {
    expect(answer.slice(s.start, s.end)).toBe(s.text);
    return s.text;
  });

describe('structured outputs: keys are the schema, values are claims', () => {
  const INVOICE = [
    'Invoice INV-2024-0193',
    'Issued: 14 March 2024',
    'Customer: Brightwater Logistics GmbH, Hamburg',
    'Items: 3 × Forklift battery (model FB-48V) at €1,250.00 each; 1 × Charger (CH-220) at €480.00',
    'Subtotal: €4,230.00',
    'VAT (19%): €803.70',
    'Total due: €5,033.70, payable within 30 days.',
  ].join('\n');
  const messages = [
    { role: 'system', content: 'Extract the invoice as JSON.' },
    { role: 'user', content: INVOICE },
  ];
  const invoice = (changes: Record<string, unknown> = {}) =>
    JSON.stringify(
      {
        invoice_number: 'INV-2024-0193',
        issue_date: '2024-03-14',
        customer: { name: 'Brightwater Logistics GmbH', city: 'Hamburg' },
        line_items: [
          { description: 'Forklift battery (model FB-48V)', quantity: 3, unit_price: 1250 },
          { description: 'Charger (CH-220)', quantity: 1, unit_price: 480 },
        ],
        subtotal: 4230,
        vat_rate: 0.19,
        vat_amount: 803.7,
        total: 5033.7,
        currency: 'EUR',
        payment_terms_days: 30,
        paid: false,
        ...changes,
      },
      null,
      2,
    );

  it('a faithful extraction is grounded, the VAT rate written as a fraction of its percent included', async () => {
    const answer = invoice();
    const svc = await check(messages, answer);
    expect(spans(svc, answer)).toEqual([]);
    expect(svc.grounded).toBe(true);
  });

  it.each([
    [{ total: 5330.7 }, '5330.7'],
    [{ vat_rate: 0.16 }, '0.16'],
    [{ customer: { name: 'Brightwater Logistics GmbH', city: 'Bremen' } }, 'Bremen'],
    [{ invoice_number: 'INV-2024-0139' }, '0139'],
  ])('%j is flagged at its value', async (change, flagged) => {
    const answer = invoice(change);
    const svc = await check(messages, answer);
    expect(svc.grounded).toBe(false);
    expect(spans(svc, answer)).toEqual([flagged]);
  });
});

describe('multi-turn chats grounded in tool results', () => {
  const TOOL = JSON.stringify({
    tracking_number: 'PX-88231-DE',
    status: 'in_transit',
    last_scan: { location: 'Leipzig hub', time: '2024-06-11T08:42:00Z' },
    estimated_delivery: '2024-06-13',
    carrier: 'DHL',
  });
  const messages = [
    { role: 'system', content: 'You are the support assistant for Parcelly, a parcel delivery service. Be concise.' },
    { role: 'user', content: 'Where is my parcel PX-88231-DE?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'track', arguments: '{"tracking_number":"PX-88231-DE"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: TOOL },
    { role: 'assistant', content: 'Your parcel is in transit with DHL.' },
    { role: 'user', content: 'When was it last scanned, and when will it arrive?' },
  ];

  it.each([
    ['It was last scanned at the Leipzig hub on June 11 at 8:42 AM UTC, and it should arrive on June 13, 2024.', true, []],
    ["I'm sorry for the wait! It was last scanned at the Leipzig hub at 08:42 UTC on June 11. I'll keep you posted.", true, []],
    ['It was last scanned at the Leipzig hub on June 11 at 8:42 PM UTC.', false, ['8']],
    ['It was last scanned at the Dresden hub on June 11.', false, ['Dresden']],
    ['It should arrive on June 14, 2024.', false, ['14']],
  ])('%s', async (answer, grounded, flagged) => {
    const svc = await check(messages, answer);
    expect(svc.checked).toBe(true);
    expect(svc.grounded).toBe(grounded);
    expect(spans(svc, answer)).toEqual(flagged);
  });

  it.each(['Happy to help! Could you share your tracking number?', "I understand your frustration. I'll look into this right away.", '¡Claro! ¿Algo más?'])(
    'chatter only: %s',
    async (answer) => {
      const svc = await check(messages, answer);
      expect(svc.grounded).toBe(true);
      expect(svc.flagged_spans).toEqual([]);
      expect(svc.claims).toEqual([]);
    },
  );
});
