// The fixed conversation every target is sent, and the fixed answer the fake upstream gives.

/** Grounding source (system message): the answer below is drawn from it, with one sentence that is not. */
export const SOURCE = [
  'Northwind Outfitters return policy, revised March 2024.',
  'Customers may return unworn clothing and footwear within 60 days of delivery for a full refund to the original payment method.',
  'Items bought during the winter clearance sale can be returned within 30 days and are refunded as store credit only.',
  'Return shipping is free for members of the Northwind Trail Club; other customers pay a flat fee of 6.95 dollars, which is deducted from the refund.',
  'Refunds are issued within 5 business days after the warehouse in Reno, Nevada receives and inspects the parcel.',
  'Personalised items, such as embroidered jackets, cannot be returned unless they arrive damaged.',
  'Damaged or defective items must be reported within 14 days with a photo, and Northwind then sends a prepaid label and a replacement.',
  'Gift recipients can exchange items for a different size or colour, but the refund always goes to the person who paid.',
  'Store purchases can be returned at any Northwind shop with the receipt or the order number.',
].join(' ');

export const QUESTION = 'I bought hiking boots in the winter sale three weeks ago and they do not fit. Can I return them, and how will I be refunded?';

/** ~200 tokens (o200k_base) of answer text. */
export const ANSWER = [
  'Yes, you can still return the boots.',
  'Items bought during the winter clearance sale can be returned within 30 days, and since you bought them three weeks ago you are inside that window.',
  'However, sale items are refunded as store credit only, not to your original payment method.',
  'Return shipping is free if you are a member of the Northwind Trail Club; otherwise a flat fee of 6.95 dollars is deducted from the refund.',
  'Once the warehouse in Reno, Nevada receives and inspects the parcel, the store credit is issued within 5 business days.',
  'If you would rather avoid the shipping fee, you can also bring the boots to any Northwind shop together with the receipt or the order number.',
  'Make sure the boots are unworn, because worn footwear is not accepted.',
  'Northwind also offers a lifetime warranty on all hiking boots, so keep your receipt in a safe place.',
  'If the boots arrived damaged, report it within 14 days with a photo and Northwind will send a prepaid label and a replacement.',
].join(' ');

export const USAGE = { prompt_tokens: 260, completion_tokens: 200, total_tokens: 460 };

/** The answer cut into `n` pieces at word boundaries (the streamed deltas). */
export function answerPieces(n = 20) {
  const words = ANSWER.split(/(?<= )/);
  const per = Math.ceil(words.length / n);
  const pieces = [];
  for (let i = 0; i < words.length; i += per) pieces.push(words.slice(i, i + per).join(''));
  return pieces;
}

/** The conversation every target is sent: the policy as a system message, then the user's question. */
export const messages = [
  { role: 'system', content: `Answer from this policy only.\n\n${SOURCE}` },
  { role: 'user', content: QUESTION },
];

/**
 * The request body for a target. `svc` targets use model `svc01` (and optionally an `svc` object); others
 * pass an upstream model name. Streamed requests ask for usage, as svc always does upstream.
 */
export function requestBody({ model, stream, svc }) {
  return JSON.stringify({
    model,
    messages,
    max_tokens: 512,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    ...(svc ? { svc } : {}),
  });
}

/** The bodies of the bench's targets: direct and Portkey (an upstream model), svc everything on, svc as a plain proxy. */
export const bodies = {
  direct: (stream) => requestBody({ model: 'gpt-4o-mini', stream }),
  svcFull: (stream) => requestBody({ model: 'svc01', stream }),
  svcPlain: (stream) => requestBody({ model: 'svc01', stream, svc: { dehallucinate: false } }),
};
