// Small closed word lists. They describe English function words and summary boilerplate, not any data set.

const words = (s: string): Set<string> => new Set(s.trim().split(/\s+/));

/**
 * Words spelled as the tokenizer spells them (`normalizeWord`): accents and other marks removed (Devanagari's vowel
 * signs too: "नहीं" is "नह"), kana voicing kept, composed, in lower case.
 */
const spelled = (s: string): Set<string> => new Set([...words(s)].map((w) => w.normalize('NFD').replace(/[^\P{M}\u3099\u309a]+/gu, '').normalize('NFC').toLowerCase()));

/** Function words: carry no claim of their own, never flagged and never evidence. */
export const STOPWORDS = words(`
a an the and or but nor so yet if then than that this these those there here where when while what which who
one whom whose why how of in on at by for from to into onto with without within about above below over under
between among through during before after since until upon across along around against toward towards via
per as is are was were be been being am do does did done doing have has had having will would shall should
can could may might must it its it's itself he him his himself she her hers herself they them their theirs
themselves we us our ours ourselves you your yours yourself i me my mine myself also too very just such
both each either neither other another any some all most more many much few several own same one's s
up down out off again further once here's there's what's who's let's whereas although though however
thus therefore hence moreover furthermore additionally meanwhile overall instead rather indeed namely
including include includes included like e.g i.e etc
because still already even actually really quite perhaps maybe simply currently m t ll re ve d
`);

/**
 * Function words of German, French and Spanish, for answers in those languages: no claim of their own, as
 * STOPWORDS in English. Spellings as `Word.norm` has them (lower case, no accents). Left out where they spell an
 * English word that says something: "die", "war", "will", "also", "bin", "man", "hat", "was", "den", "son", "era",
 * "con", "sin", "plus". Not counted as English function words (a translation is told apart by STOPWORDS alone).
 */
export const OTHER_FUNCTION_WORDS = words(`
der das dem des ein eine einen einem einer eines und oder aber fur mit von zu zum zur im ins vom beim auf aus
bei nach uber unter vor durch gegen ohne bis seit wahrend ist sind waren wird werden wurde wurden haben hatte
es er sie wir ihr ich du auch noch nur schon sehr etwa dass wie wenn als ob dieser diese dieses jeder jede alle
pro dann denn doch ja mehr viel viele einige sich
le la les un une du de et ou mais pour par avec sans dans sur sous chez entre sont etait ete au aux ce cet
cette ces qui que il elle ils elles nous vous leur leurs sa ses se tres aussi tout tous toute toutes comme
el los las una unos unas y o pero para por del al su sus es fue esta estan este estos lo le muy mas tambien
como cuando donde
`);

/**
 * Words a summariser uses to talk about the text itself ("the passage states..."). They are not
 * claims about the world, so their absence from the sources is not a hallucination.
 */
export const META_WORDS = words(`
passage passages text texts article articles document documents source sources summary summaries summarize
summarise summarizes summarises summarized summarised summarizing concise concisely key information info
mention mentions mentioned mentioning state states stated stating discuss discusses discussed discussing
describe describes described describing provide provides provided providing highlight highlights
highlighted highlighting note notes noted noting report reports reported explain explains explained
detail details detailed outline outlines outlined cover covers covered covering core piece pieces point
points main following below above here brief briefly overview present presents presented indicate
indicates indicated according refer refers referred regarding related given write written author
called named titled
`);

/**
 * Negation cues; a claim that adds or drops one can flip the meaning. German, French, Spanish, Portuguese, Italian,
 * Russian, Ukrainian, Hindi and Arabic ones too: "nicht", "kein", "ne … pas", "jamais", "nunca", "nadie", "não",
 * "nessuno", "не", "никогда", "ні", "नहीं", "لا", "ليس". Chinese
 * ones as ICU's segmentation cuts them ("不", "没有", "未", "非", "无法", "并非"; `cjkWords` cuts 不 and 没 off the
 * verb they are glued to, "没读"), and Japanese endings ("ません" is "ませ"+"せん" or "しま"+"せん", "ない", "なかった":
 * `BACK_NEGATIONS`).
 */
export const NEGATIONS = spelled(`not no never none nobody nothing neither nor without cannot n't nowhere
nicht kein keine keinen keinem keiner keines nie niemals nichts niemand nirgends weder
ne pas jamais rien aucun aucune ni non
nunca nada nadie ningun ninguna ninguno jamas tampoco
não nem nenhum nenhuma nessuno nessuna niente
не нет ни никогда ничего никто нигде никакой без ні ніколи
नहीं न मत
لا لم لن ليس ليست غير
不 没 没有 沒 沒有 未 未曾 从未 從未 从不 從不 绝不 決不 决不 非 并非 並非 无 無 无法 無法 毫无 毫無 别 勿
せん ない なかった ず
안 못 않다 없다 아니다 못하다`);

/**
 * Negations that follow what they negate: Japanese verb and adjective endings ("営業しません", "必要ない", "営業せず"),
 * Korean "않다", "없다", "아니다" and "못하다" in any of their endings (`koreanReading`: "열지 않습니다", "부작용이
 * 없다"). They reach back to the content words before them, as English "not" reaches forward; Korean "안" and "못"
 * before a verb reach forward ("안 엽니다").
 */
export const BACK_NEGATIONS = words(`せん ない なかった ず 않다 없다 아니다 못하다`);

/**
 * German negations that may close their clause, the verb before them ("Er kennt den Mann nicht.", "Das Museum öffnet
 * am Montag nicht."): one that reaches no content word after it reaches back to the content words before it.
 */
export const CLAUSE_FINAL_NEGATIONS = words(`nicht nie niemals`);

/**
 * Chinese words that begin with a negation's character and are no negation: "不过" (but), "不同" (different), "未来"
 * (the future), "没错" (right). Any other word of two characters that begins with 不, 没 or 未 is that negation and
 * the word after it ("没读" is 没 读).
 */
export const NOT_NEGATED_CJK = words(`不过 不仅 不但 不论 不管 不断 不久 不少 不同 不错 不如 未来 没错 没事 没关系 不好意思`);

/**
 * Korean words that carry no claim of their own, in the form `koreanReading` gives them (particles cut off, "있다"
 * for any ending of it): existence and the copula, "있다" (so "부작용이 있다" and "부작용이 없다" differ by the
 * negation alone), pronouns and determiners, conjunctions, bound nouns ("것", "수").
 */
export const KOREAN_FUNCTION_WORDS = words(`있다 이다 하다 되다 그 이 저 그것 이것 것 수 등 및 또는 그리고 하지만 그러나 또한
또 매우 더 위해 대한 대해 통해 따라 같은 때문`);

/** Quantifiers that make a claim stronger or weaker than its source. */
export const QUANTIFIERS = words(`all every always only entire entirely whole never none most majority
minority many few several some sole solely exclusively completely fully totally`);

/**
 * A currency's symbol, code and words, each standing for the others beside a number: "$12", "USD 12", "12 US
 * dollars" and "twelve dollars" say one thing; "12 euros" says another. Keyed by a form's norm; each form's
 * value is its whole group, itself included (a symbol is no content word, so it is found only as this).
 */
export const CURRENCIES: ReadonlyMap<string, readonly string[]> = (() => {
  const groups = [
    ['$', 'usd', 'us', 'dollar', 'dollars'],
    ['€', 'eur', 'euro', 'euros'],
    ['£', 'gbp', 'pound', 'pounds', 'sterling'],
    ['¥', 'jpy', 'yen'],
  ];
  const out = new Map<string, readonly string[]>();
  // "us" is found for "USD" ("US dollars") but does not itself name the currency: "the US" is a country.
  for (const g of groups) for (const form of g) if (form !== 'us') out.set(form, g);
  return out;
})();

/**
 * Units of length, weight, volume and speed, by stem (`SYNONYMS` puts each unit's spellings on one: "kilometres",
 * "kilometers" and "km" are "km"). Beside a number such a unit is as exact as a name: "12.5 miles" is not "12.5 km".
 * Not "m" and "g", which a source may write for a scale or leave unread.
 */
export const MEASURE_UNITS = new Set(['mil', 'km', 'kg', 'lb', 'l', 'gallon', 'feet', 'inch', 'yard', 'oz', 'cm', 'mm', 'ml', 'mph']);

export const MONTHS: ReadonlyMap<string, number> = new Map([
  ['january', 1], ['jan', 1], ['february', 2], ['feb', 2], ['march', 3], ['mar', 3], ['april', 4],
  ['apr', 4], ['may', 5], ['june', 6], ['jun', 6], ['july', 7], ['jul', 7], ['august', 8], ['aug', 8],
  ['september', 9], ['sep', 9], ['sept', 9], ['october', 10], ['oct', 10], ['november', 11], ['nov', 11],
  ['december', 12], ['dec', 12],
]);

/** Days of the week by their names and abbreviations: a source's "Monday to Friday" backs "Mon–Fri". */
export const WEEKDAYS: ReadonlyMap<string, number> = new Map([
  ['monday', 1], ['mon', 1], ['tuesday', 2], ['tue', 2], ['tues', 2], ['wednesday', 3], ['wed', 3], ['thursday', 4],
  ['thu', 4], ['thur', 4], ['thurs', 4], ['friday', 5], ['fri', 5], ['saturday', 6], ['sat', 6], ['sunday', 7], ['sun', 7],
]);

export const NUMBER_WORDS: ReadonlyMap<string, number> = new Map([
  ['zero', 0], ['one', 1], ['two', 2], ['three', 3], ['four', 4], ['five', 5], ['six', 6], ['seven', 7],
  ['eight', 8], ['nine', 9], ['ten', 10], ['eleven', 11], ['twelve', 12], ['thirteen', 13],
  ['fourteen', 14], ['fifteen', 15], ['sixteen', 16], ['seventeen', 17], ['eighteen', 18],
  ['nineteen', 19], ['twenty', 20], ['thirty', 30], ['forty', 40], ['fifty', 50], ['sixty', 60],
  ['seventy', 70], ['eighty', 80], ['ninety', 90], ['dozen', 12], ['hundred', 100],
  ['single', 1], ['pair', 2], ['twice', 2], ['half', 0.5], ['double', 2], ['triple', 3],
  ['third', 3], ['fourth', 4], ['fifth', 5], ['sixth', 6], ['seventh', 7], ['eighth', 8], ['ninth', 9],
  ['tenth', 10], ['eleventh', 11], ['twelfth', 12],
]);

/** Ordinals in words, by their number: a claim's "2nd" is a source's "second", and "second" its "2nd". */
export const ORDINAL_WORDS: ReadonlyMap<number, string> = new Map([
  [1, 'first'], [2, 'second'], [3, 'third'], [4, 'fourth'], [5, 'fifth'], [6, 'sixth'], [7, 'seventh'], [8, 'eighth'],
  [9, 'ninth'], [10, 'tenth'], [11, 'eleventh'], [12, 'twelfth'],
]);

export const SCALE_WORDS: ReadonlyMap<string, number> = new Map([
  ['hundred', 1e2], ['thousand', 1e3], ['k', 1e3], ['million', 1e6], ['m', 1e6], ['mn', 1e6],
  ['billion', 1e9], ['bn', 1e9], ['b', 1e9], ['trillion', 1e12], ['dozen', 12],
]);

/** Equivalent surface forms, mapped to one canonical stem on both sides. */
export const SYNONYMS: ReadonlyMap<string, string> = new Map([
  ['usa', 'us'], ['u.s', 'us'], ['u.s.a', 'us'], ['america', 'us'], ['american', 'us'],
  ['uk', 'gb'], ['u.k', 'gb'], ['britain', 'gb'], ['british', 'gb'],
  ['celsius', 'c'], ['centigrad', 'c'], ['fahrenheit', 'f'],
  ['kilobyt', 'kb'], ['megabyt', 'mb'], ['gigabyt', 'gb'], ['terabyt', 'tb'], ['kilowatt', 'kw'], ['megawatt', 'mw'], ['gigawatt', 'gw'],
  ['percent', '%'], ['per cent', '%'], ['pct', '%'],
  ['kilometr', 'km'], ['kilometer', 'km'], ['kilogram', 'kg'], ['litr', 'l'], ['liter', 'l'], ['lbs', 'lb'], ['mi', 'mil'],
  ['gal', 'gallon'], ['ft', 'feet'], ['foot', 'feet'], ['ounc', 'oz'], ['yd', 'yard'], ['centimetr', 'cm'], ['centimeter', 'cm'],
  ['millimetr', 'mm'], ['millimeter', 'mm'], ['millilitr', 'ml'], ['milliliter', 'ml'],
  ['approximately', 'about'], ['roughly', 'about'], ['around', 'about'], ['nearly', 'about'],
  ['almost', 'about'], ['circa', 'about'],
  ['kill', 'die'], ['dead', 'die'], ['death', 'die'],
  ['film', 'movie'], ['begin', 'start'], ['commence', 'start'], ['purchase', 'buy'],
  ['large', 'big'], ['huge', 'big'], ['small', 'little'], ['receive', 'get'], ['obtain', 'get'],
]);

/**
 * Interjections and conversational markers: "Yeah.", "Sure,", "Hi!" carry no claim, and a sentence made only
 * of them asserts nothing.
 */
export const CHATTER_WORDS = new Set(
  [
    ...words(`yeah yes yep yup yea sure ok okay oh ah well hi hello hey thanks thank please
sorry nope nah wow cool awesome hmm um uh lol haha absolutely certainly definitely indeed alright right great
cheers gerne claro vale`),
    // Chinese and Japanese greetings and acknowledgements ("您好！", "好的。", "かしこまりました。"), spelled as the
    // tokenizer spells them: accents removed, kana as written ("ご" stays "ご").
    ...words(`您好 你好 好的 当然 谢谢 没问题 こんにちは はい もちろん かしこまりました 承知しました ありがとうございます`),
    // And in Portuguese, Russian, Ukrainian, Polish, Turkish, Hindi, Arabic and Thai (a Thai greeting is one run of
    // letters, its polite particle glued on: "สวัสดีครับ").
    ...words(`olá ola obrigado obrigada sim
конечно здравствуйте привет спасибо пожалуйста да хорошо отлично звісно вітаю привіт дякую
cześć dziękuję oczywiście merhaba teşekkürler tabii evet tamam
नमस्ते धन्यवाद शुक्रिया हाँ ज़रूर बिल्कुल
مرحبا أهلا شكرا شكرًا نعم بالتأكيد طبعا حسنا
สวัสดี สวัสดีครับ สวัสดีค่ะ ขอบคุณ ขอบคุณครับ ขอบคุณค่ะ ได้เลย ได้เลยครับ ได้เลยค่ะ`),
  ]
    .map((w) => w.normalize('NFD').replace(/[^\P{M}\u3099\u309a]+/gu, '').normalize('NFC'))
    // Korean ones ("네.", "감사합니다!"), as Korean is read: composed.
    .concat([...words(`네 예 안녕하세요 안녕하십니까 감사합니다 고맙습니다 물론 물론입니다 물론이죠 알겠습니다 좋습니다 좋아요`)]),
);

/**
 * A unit of data size, time or temperature: its kind, and its size in the kind's base unit (bytes, seconds, degrees
 * Celsius), a value in it being `value * size + offset` of the base unit.
 */
export interface Unit {
  kind: 'data' | 'time' | 'temperature';
  /** Decimal size (a kilobyte of 1000 bytes). */
  size: number;
  /** Binary size (a kilobyte of 1024 bytes); the decimal one for units that have no other. */
  binary: number;
  /** Where the unit's zero is in the base unit (Fahrenheit's 0° is −17.8 °C); 0 for all but temperatures. */
  offset: number;
}

const unit = (kind: Unit['kind'], size: number, binary = size, offset = 0): Unit => ({ kind, size, binary, offset });

/**
 * Units a number is converted between ("2516582 bytes" is "2.4 MB", "1530 ms" is "1.5 seconds", "165 minutes" is
 * "2.75 hours", "21 °C" is "70 °F"), by their spellings in lower case.
 */
export const UNITS: ReadonlyMap<string, Unit> = new Map([
  ...['b', 'byte', 'bytes'].map((w) => [w, unit('data', 1)] as const),
  ...['kb', 'kilobyte', 'kilobytes', 'kib'].map((w) => [w, unit('data', 1e3, 1024)] as const),
  ...['mb', 'megabyte', 'megabytes', 'mib'].map((w) => [w, unit('data', 1e6, 1024 ** 2)] as const),
  ...['gb', 'gigabyte', 'gigabytes', 'gib'].map((w) => [w, unit('data', 1e9, 1024 ** 3)] as const),
  ...['tb', 'terabyte', 'terabytes', 'tib'].map((w) => [w, unit('data', 1e12, 1024 ** 4)] as const),
  ...['ms', 'msec', 'millisecond', 'milliseconds'].map((w) => [w, unit('time', 1e-3)] as const),
  ...['s', 'sec', 'secs', 'second', 'seconds'].map((w) => [w, unit('time', 1)] as const),
  ...['min', 'mins', 'minute', 'minutes'].map((w) => [w, unit('time', 60)] as const),
  ...['h', 'hr', 'hrs', 'hour', 'hours'].map((w) => [w, unit('time', 3600)] as const),
  ...['day', 'days'].map((w) => [w, unit('time', 86_400)] as const),
  ...['week', 'weeks', 'wk', 'wks'].map((w) => [w, unit('time', 604_800)] as const),
  // A temperature's scale is its unit only after "°" or "degrees", or as a sign, "℃", or kelvin (`numberUnit`): "21 °C" is "69.8 °F".
  ...['c', 'celsius', 'centigrade'].map((w) => [w, unit('temperature', 1)] as const),
  ...['f', 'fahrenheit'].map((w) => [w, unit('temperature', 5 / 9, 5 / 9, -160 / 9)] as const),
  // Kelvin, written as a word or as the Kelvin sign ("77 K" with a plain K is read as 77 thousand).
  ...['kelvin', 'kelvins'].map((w) => [w, unit('temperature', 1, 1, -273.15)] as const),
]);
