/** Answers longer than this (UTF-16 units) are checked as they are: parsing them would hold the event loop. */
export const MAX_JSON_ANSWER_CHARS = 256 * 1024;

const SPACE = 0x20;
const NEWLINE = 0x0a;

/**
 * What the grounding check reads of a JSON answer (structured outputs, `json_object`): its string values and
 * numbers, where they are. Keys, quotes, `true`/`false`/`null` become spaces and brackets, commas and colons
 * line breaks, one character for one, so every offset into the result is an offset into the answer. Keys are
 * the app's schema, not the model's claims: checked as words, a correct `{"city":"Paris"}` would be flagged for
 * "city". Undefined when the answer is not one JSON object or array.
 *
 * @example
 * jsonValuesText('{"city":"Paris","year":1889}'); // '        Paris  \n      1889\n' (same length)
 */
export function jsonValuesText(answer: string): string | undefined {
  if (answer.length > MAX_JSON_ANSWER_CHARS) return undefined;
  const first = answer.trimStart()[0];
  if (first !== '{' && first !== '[') return undefined;
  try {
    JSON.parse(answer);
  } catch {
    return undefined;
  }
  const out = new Uint16Array(answer.length);
  let i = 0;
  while (i < answer.length) {
    const c = answer.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const end = stringEnd(answer, i);
      const isKey = answer.slice(end + 1).trimStart()[0] === ':';
      out.fill(SPACE, i, end + 1);
      if (!isKey) for (let j = i + 1; j < end; j++) out[j] = answer.charCodeAt(j);
      i = end + 1;
    } else if (c === 0x7b || c === 0x7d || c === 0x5b || c === 0x5d || c === 0x2c || c === 0x3a) {
      out[i++] = NEWLINE;
    } else if (c === 0x74 /* t */ || c === 0x66 /* f */ || c === 0x6e /* n */) {
      const word = c === 0x66 ? 5 : 4;
      out.fill(SPACE, i, i + word);
      i += word;
    } else {
      out[i] = c;
      i++;
    }
  }
  let text = '';
  for (let start = 0; start < out.length; start += 8192) text += String.fromCharCode(...out.subarray(start, start + 8192));
  return text;
}

/** Index of the quote that closes the JSON string opening at `start` (the text is valid JSON). */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c /* \ */ ? 2 : 1;
  return i;
}
