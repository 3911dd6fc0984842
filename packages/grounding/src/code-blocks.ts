import { META_WORDS, STOPWORDS } from './lexicon.js';
import { jsonValuesText } from './json-answer.js';
import { findLinks, type Link } from './links.js';
import { numberKey } from './source-index.js';

/**
 * What of an answer's fenced code blocks (```` ```lang … ``` ````, `~~~`) is a claim the sources can back, the way a
 * code reviewer checks a snippet against the documentation: the names the snippet takes from a library or a tool
 * (packages installed and imported, functions and classes it calls but does not define, the members it calls on
 * them, the options and keyword arguments it passes to them, configuration keys, environment variables, a program's
 * subcommands and `--flags`), the numbers set in a configuration or given to a flag, web addresses, and the comments
 * (prose). Not: the names the snippet defines itself (variables, functions, classes, parameters, import aliases) and
 * its data, the numbers it passes (the example's choice), language keywords and built-ins, common libraries' options,
 * syntax, string values, the tools everybody has (`npm`, `git`, `curl`) and their flags.
 */
export interface CodeReading {
  /** The answer with its code blocks' unchecked parts blanked (spaces, a "." opening each line), one character for one. */
  text: string;
  /** The names to check, each checked whole as written (`Link.name`; kind `code`), ordered by start. */
  names: Link[];
}

/**
 * A fence's opening and its language; the rest of the line must hold no backtick (`fenceOpening`). Not `[^`]*$` here:
 * after `[\w+#.-]*` that backtracks quadratically over a long line ending in a backtick (0.8 s for 16 KB).
 */
const FENCE_OPEN_RE = /^[ \t]*(```+|~~~+)[ \t]*([\w+#.-]*)/;

/** The fence a line opens and its language (lower case), or undefined. */
function fenceOpening(line: string): { fence: string; lang: string } | undefined {
  const m = FENCE_OPEN_RE.exec(line);
  if (!m || line.includes('`', m[0].length)) return undefined;
  return { fence: m[1]!, lang: m[2]!.toLowerCase() };
}

const SHELL_LANGS = new Set(['bash', 'sh', 'shell', 'zsh', 'console', 'shell-session', 'shellsession', 'terminal', 'fish', 'powershell', 'ps1', 'pwsh', 'cmd', 'bat']);
const CONFIG_LANGS = new Set(['yaml', 'yml', 'toml', 'ini', 'json', 'jsonc', 'json5', 'env', 'dotenv', 'properties', 'conf', 'cfg']);
/** Languages whose comments start with "#"; the C family's start with "//" and "/*". */
const HASH_COMMENT_LANGS = new Set(['python', 'py', 'python3', 'ruby', 'rb', 'yaml', 'yml', 'toml', 'ini', 'r', 'perl', 'pl', 'dockerfile', 'docker', 'makefile', 'make', 'env', 'dotenv', 'properties', 'conf', 'cfg', 'elixir', 'ex', 'nim', 'julia', 'jl', 'hcl', 'terraform', 'tf']);

/** Words of the languages chat models write snippets in, and names every runtime has: the snippet's, not the library's. */
const KEYWORDS = new Set(
  `if else elif for while do return import from as def class const let var function async await new try except catch
finally with in of not and or is none true false null undefined this self super print yield lambda pass break continue
raise throw throws typeof instanceof delete void static public private protected export default extends implements
interface type enum struct fn func fun impl trait pub mut use mod crate package go defer chan select switch case match
where when then end begin module require include local global nonlocal assert del sizeof unsafe readonly declare
namespace abstract final override val object companion init get set nil echo panic make cap recover iota None True
False`.split(/\s+/),
);
const BUILTINS = new Set(
  `len range str int float bool list dict tuple open isinstance enumerate zip map filter sorted sum min max abs round
input repr hash id iter next reversed any all getattr setattr hasattr vars dir format callable issubclass chr ord
bytes bytearray frozenset complex divmod pow exit quit Exception ValueError TypeError KeyError IndexError
RuntimeError StopIteration AttributeError ImportError OSError IOError NotImplementedError AssertionError
List Dict Optional Any Union Tuple Set Callable Iterable Iterator Generator Literal TypedDict Awaitable Sequence Mapping
console window document globalThis fetch setTimeout setInterval clearTimeout clearInterval queueMicrotask structuredClone
Promise Object Array String Number Boolean Symbol BigInt Date Math JSON RegExp Error TypeError RangeError SyntaxError
Map WeakMap WeakSet Intl Reflect Proxy URL URLSearchParams Headers Request Response FormData Blob AbortController
TextEncoder TextDecoder Buffer process module exports require parseInt parseFloat isNaN encodeURIComponent
decodeURIComponent atob btoa os sys json time re asyncio datetime pathlib typing logging subprocess collections math
random functools itertools dataclasses uuid base64 hashlib io shutil tempfile argparse fs path http https crypto util
child_process events stream url fmt log errors strings strconv context bufio ioutil main std println printf
Some Ok Err Vec Box Rc Arc String Option Result unwrap expect requests httpx aiohttp urllib axios pandas pd numpy np
plt matplotlib`.split(/\s+/),
);
/** Tools a snippet runs without their documentation being a source: their names and flags are not checked. */
const COMMON_TOOLS = new Set(
  `npm npx yarn pnpm bun pip pip3 pipx poetry uv conda cargo go gem brew apt apt-get yum dnf apk composer dotnet git curl
wget cd ls cat echo export set unset mkdir rm cp mv touch chmod chown sudo source python python3 node deno ruby java javac
docker docker-compose kubectl helm make cmake gcc tar unzip grep sed awk head tail less open code vim nano printf env
which ssh scp systemctl service jq xargs tee find sort uvx`.split(/\s+/),
);
/** Subcommands after which a package manager's words are packages: `npm install openai`, `pip install requests`. */
const INSTALLS: ReadonlyMap<string, ReadonlySet<string>> = new Map(
  [
    ['npm', 'install i add'],
    ['yarn', 'add'],
    ['pnpm', 'add install i'],
    ['bun', 'add install i'],
    ['pip', 'install'],
    ['pip3', 'install'],
    ['pipx', 'install run'],
    ['poetry', 'add'],
    ['uv', 'add install'],
    ['conda', 'install'],
    ['cargo', 'add install'],
    ['go', 'get install'],
    ['gem', 'install'],
    ['brew', 'install'],
    ['apt', 'install'],
    ['apt-get', 'install'],
    ['composer', 'require'],
    ['deno', 'add install'],
  ].map(([tool, subs]) => [tool!, new Set(subs!.split(' '))]),
);

/** Records a name to check at `[start, end)` of the answer; `also`, another spelling that backs it as well. */
type Namer = (start: number, end: number, also?: string, codeOnly?: boolean) => void;

/** One lexical unit of a line of code. */
interface Lexeme {
  kind: 'ident' | 'number' | 'string' | 'comment' | 'punct';
  start: number;
  end: number;
  text: string;
  /**
   * The bracket it is in, across the block's lines: '' at the top, '(' a call's arguments (where `name=` is a keyword
   * argument), 'def' a definition's parameters, '{' an object, a dictionary or a block, '['.
   */
  within: '' | '(' | 'def' | '{' | '[';
  /**
   * In the arguments of a call of a built-in or a common library (`print(…, end="")`, `fetch(url, { method: "POST" })`,
   * `requests.post(url, headers=…)`): their keys are that library's, not the documented one's.
   */
  common: boolean;
  /** In the arguments of a call (its keys are options), and the function called when it is a bare name (`Report(`). */
  call: boolean;
  callee: string | undefined;
}

/**
 * Reads the fenced code blocks of `answer` (see `CodeReading`). Offsets are kept: what is not read becomes spaces,
 * and the first character a line's reading blanks becomes a full stop, so no two lines of code read as one sentence.
 *
 * @example
 * readCodeBlocks('```js\nconst c = new Client({ maxRetries: 2 });\n```', stem).names.map((n) => n.name); // ['Client', 'maxRetries']
 */
export function readCodeBlocks(answer: string, stemOf: (word: string) => string): CodeReading {
  if (!answer.includes('```') && !answer.includes('~~~')) return { text: answer, names: [] };
  const blocks: { lang: string; from: number; to: number }[] = [];
  // Line by line, as CommonMark reads fences: a block runs to a line of the same fence alone, or to the answer's end.
  let open: { fence: string; lang: string; from: number } | undefined;
  for (let lineStart = 0; lineStart <= answer.length; ) {
    let lineEnd = answer.indexOf('\n', lineStart);
    if (lineEnd === -1) lineEnd = answer.length;
    const line = answer.slice(lineStart, lineEnd);
    if (open === undefined) {
      const fence = fenceOpening(line);
      if (fence) open = { ...fence, from: lineEnd + 1 };
    } else if (line.trim() === open.fence || (line.trim().startsWith(open.fence) && /^[`~]+$/.test(line.trim()))) {
      blocks.push({ lang: open.lang, from: Math.min(open.from, lineStart), to: Math.max(lineStart - 1, open.from) });
      open = undefined;
    }
    lineStart = lineEnd + 1;
  }
  if (open !== undefined && open.from < answer.length) blocks.push({ lang: open.lang, from: open.from, to: answer.length });
  if (blocks.length === 0) return { text: answer, names: [] };
  const out = answer.split('');
  const names: Link[] = [];
  const keep = new Uint8Array(answer.length);
  const name: Namer = (start, end, also, codeOnly) => {
    const text = answer.slice(start, end);
    // Part of a web address, which is checked whole as a link.
    if (keep[start] === 1) return;
    // Its words as the tokenizer cuts the sources' text, letters apart from digits ("svc01" is found by "svc").
    const words = text.match(/\p{L}+/gu) ?? [];
    // A name spelled only with function words ("--all", "in") or words about text ("info", "summary") has no passage
    // to find it by: not checked.
    if (words.every((w) => STOPWORDS.has(w.toLowerCase()) || META_WORDS.has(w.toLowerCase()))) return;
    // Its numbers too: "pro2" is found in its passage by "pro", a function word in German, and 2.
    const numbers = (text.match(/\d+/g) ?? []).map((d) => numberKey(Number(d)));
    const link: Link = { kind: 'code', start, end, keys: [], lookups: [...new Set([...words.map((w) => stemOf(w.toLowerCase())), ...numbers])], name: text };
    if (also !== undefined) link.names = [text, also];
    if (codeOnly && /^[a-z]+$/.test(text)) link.codeOnly = true;
    names.push(link);
  };
  // Prose in a fence (a ```text block, a sentence laid out in one) is read as prose: its lines are kept whole. Web
  // addresses are kept to be checked as links, quoted or not.
  for (const b of blocks) {
    const body = answer.slice(b.from, b.to);
    // JSON in a fence is data, as a JSON answer is (an extraction's record): its values are claims, its keys the
    // schema's (`jsonValuesText`).
    const values = JSON_LANGS.has(b.lang) || b.lang === '' ? jsonValuesText(body) : undefined;
    if (values !== undefined) {
      for (let i = 0; i < values.length; i++) out[b.from + i] = values[i]!;
      keep.fill(1, b.from, b.to);
      b.lang = JSON_DATA;
      continue;
    }
    // An untagged block that is all settings ("port: 8080", "[server]", "workers = 4") is a configuration.
    if (b.lang === '' && configBody(body)) b.lang = 'conf';
    for (const link of findLinks(body)) if (link.kind === 'url') keep.fill(1, b.from + link.start, b.from + link.end);
    // A shell session with prompts: its other lines are output (`readShell`), not prose. A query's words are SQL's.
    if ((PROMPT_RE.test(body) && shellBlock(b.lang, body)) || SQL_LANGS.has(b.lang)) continue;
    let lineStart = b.from;
    while (lineStart < b.to) {
      let lineEnd = answer.indexOf('\n', lineStart);
      if (lineEnd === -1 || lineEnd > b.to) lineEnd = b.to;
      if (PROSE_LANGS.has(b.lang) || proseLine(answer.slice(lineStart, lineEnd))) keep.fill(1, lineStart, lineEnd);
      lineStart = lineEnd + 1;
    }
  }
  const close = closers(answer);
  const lexed = blocks.filter((b) => b.lang !== JSON_DATA).map((b) => ({
    ...b,
    lines: shellBlock(b.lang, answer.slice(b.from, b.to)) ? undefined : lexLines(answer, b.from, b.to, b.lang, close).filter((l) => l.length === 0 || !keep[l[0]!.start]),
  }));
  // Names the snippets define, over all blocks: a variable made in one is used in the next.
  const defined = new Set<string>();
  // Of which the snippet's own (not imported): a call of one takes the snippet's arguments, not the library's options.
  const own = new Set<string>();
  for (const b of lexed) if (b.lines) for (const line of b.lines) definitions(line, defined, own, CONFIG_LANGS.has(b.lang));
  for (const b of lexed) {
    if (SQL_LANGS.has(b.lang)) readSql(answer, b.from, b.to, keep, name);
    else if (b.lines) for (const line of b.lines) readCodeLine(line, defined, own, CONFIG_LANGS.has(b.lang), keep, name);
    else readShell(answer, b.from, b.to, keep, name);
    for (let i = b.from; i < b.to; i++) if (!keep[i] && answer[i] !== '\n') out[i] = ' ';
    // Each line a sentence of its own: a full stop where the line's first blanked character was.
    let lineStart = b.from;
    while (lineStart < b.to) {
      let lineEnd = answer.indexOf('\n', lineStart);
      if (lineEnd === -1 || lineEnd > b.to) lineEnd = b.to;
      for (let i = lineStart; i < lineEnd; i++) {
        if (!keep[i]) {
          out[i] = '.';
          break;
        }
      }
      lineStart = lineEnd + 1;
    }
  }
  // A name is checked whole (`Link.name`): its characters are blanked as a link's are, by the caller.
  return { text: out.join(''), names: names.sort((a, b) => a.start - b.start) };
}

const JSON_LANGS = new Set(['json', 'jsonc', 'json5']);
/** A block read as JSON data (`jsonValuesText`), not as code. */
const JSON_DATA = '\u0000json';

const SQL_LANGS = new Set(['sql', 'mysql', 'postgresql', 'postgres', 'psql', 'sqlite', 'plsql', 'tsql']);
/** SQL's words and common functions, in lower case: the query's, not the schema's. */
const SQL_WORDS = new Set(
  `select from where and or not in is null as on join inner left right full outer cross group by order having limit
offset insert into values update set delete create table view index drop alter add column primary key foreign
references distinct union all case when then else end asc desc like ilike between exists with returning default
count sum avg min max coalesce nullif now date cast lower upper length round abs extract interval true false
current_date current_timestamp over partition row_number rank if replace using natural`.split(/\s+/),
);

/**
 * A query's tables and columns, which a schema in the sources names (`users`, `created_at`): every name that is no SQL
 * word, function, alias (`FROM users u`, `AS total`) or string. A qualified `u.email` is its column after an alias.
 */
function readSql(answer: string, from: number, to: number, keep: Uint8Array, name: Namer): void {
  const body = answer.slice(from, to);
  const aliases = new Set<string>();
  const tokens = [...body.matchAll(/--[^\n]*|'(?:[^']|'')*'|"[^"\n]*"|[A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)*|\S/g)];
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k]![0].toLowerCase();
    const prev = tokens[k - 1]?.[0].toLowerCase();
    const before = tokens[k - 2]?.[0].toLowerCase();
    // `AS total`, and a table's alias right after it: `FROM users u`, `JOIN orders o`.
    if (/^[a-z_]/.test(t) && !SQL_WORDS.has(t) && (prev === 'as' || (prev !== undefined && /^[a-z_][\w$]*$/.test(prev) && !SQL_WORDS.has(prev) && (before === 'from' || before === 'join')))) aliases.add(t);
  }
  for (const m of tokens) {
    const text = m[0];
    const at = from + m.index;
    if (text.startsWith('--')) {
      keep.fill(1, at + 2, at + text.length);
      continue;
    }
    if (!/^[A-Za-z_]/.test(text)) continue;
    const parts = text.split('.');
    let offset = at;
    for (const [i, part] of parts.entries()) {
      const lower = part.toLowerCase();
      if (!SQL_WORDS.has(lower) && !aliases.has(lower) && !(i === 0 && parts.length > 1 && aliases.has(lower))) name(offset, offset + part.length);
      offset += part.length + 1;
    }
  }
}

/** Fences whose text is prose, read as the rest of the answer is. */
const PROSE_LANGS = new Set(['text', 'txt', 'plaintext', 'plain', 'markdown', 'md', 'output', 'log', 'quote']);

/**
 * A line that reads as a sentence rather than code: a capital or a digit first, three words or more, and either a
 * sentence's end last and none of code's marks (`=`, `;`, braces, a call's "word("), or four words or more of
 * letters, digits and prose's punctuation alone ("Marta Lopez won the title in 2018").
 */
function proseLine(line: string): boolean {
  const words = line.trim().split(/\s+/);
  if (words.length < 3 || !/^\s*(?:[-*\u2022]\s+)?(?:\p{Extended_Pictographic}\ufe0f?\s*)?[\u00bf\u00a1"'\u201c(]?[\p{Lu}\p{N}]/u.test(line)) return false;
  if (/[.!?\u3002]["'\u201d\u2019)]?\s*$/.test(line) && !/[=;{}<>|`]|\$(?!\d)|[\w\]]\(/.test(line)) return true;
  return words.length >= 4 && words.every((w, i) => (i === 0 && /^\p{Extended_Pictographic}/u.test(w)) || /^[\p{L}\p{N}\u2022*-][\p{L}\p{N}'\u2019.,:;!?%\u20ac$\u00a3-]*$/u.test(w));
}

function shellBlock(lang: string, body: string): boolean {
  if (SHELL_LANGS.has(lang)) return true;
  if (lang !== '') return false;
  // No language: a shell session when every line is a prompt or starts with a tool.
  const lines = body.split('\n').filter((l) => l.trim() !== '');
  return lines.length > 0 && lines.every((l) => /^\s*\$\s/.test(l) || COMMON_TOOLS.has(l.trim().split(/\s+/)[0]!));
}

const PROMPT_RE = /^[ \t]*(?:\$|PS>)[ \t]/m;
const WORD_RE = /"(?=((?:[^"\\\n]|\\.)*))\1("?)|'[^'\n]*'|[^\s"'|;&<>()]+|\|\||&&|[|;&]/g;
/** WORD_RE without double-quoted words: the rest of a line after a double quote that does not close. */
const WORD_NO_QUOTE_RE = /'[^'\n]*'|[^\s"'|;&<>()]+|\|\||&&|[|;&]/g;

/**
 * A line's shell words, quoted ones whole: `"…"` (escapes kept), `'…'`, a run of plain characters, an operator. A
 * double quote that does not close is passed over, and so is every later one on the line: each sits after a
 * backslash in the first one's reading, and reads to the line's end too. Looking for each one's close anew was
 * quadratic ('"\\"\\"\\…', 0.4 s for 16 KB); the double-quoted word's characters are taken at once (a look-ahead
 * and its capture) so a regex never backtracks over them either.
 */
function shellWords(line: string): { text: string; index: number }[] {
  const words: { text: string; index: number }[] = [];
  let re = WORD_RE;
  re.lastIndex = 0;
  for (let m = re.exec(line); m !== null; m = re.exec(line)) {
    if (m[0][0] === '"' && m[2] === '') {
      WORD_NO_QUOTE_RE.lastIndex = m.index + 1;
      re = WORD_NO_QUOTE_RE;
      continue;
    }
    words.push({ text: m[0], index: m.index });
  }
  return words;
}

/**
 * A shell session's commands: packages after an install (`npm install openai`, `pip install "requests>=2"`, names
 * without their version), a program's name, its subcommands and `--flags` when the program is not a common tool,
 * environment variables set (`export ACME_API_KEY=…`), and the numbers given to a flag or a variable.
 */
function readShell(answer: string, from: number, to: number, keep: Uint8Array, name: Namer): void {
  // A session with prompts ("$ npm install …") prints output on the lines without one: what a program printed, not
  // a command to check.
  const prompted = PROMPT_RE.test(answer.slice(from, to));
  let command: Word[] = [];
  const flush = () => {
    if (command.length > 0) readCommand(command, keep, name);
    command = [];
  };
  let continued = false;
  let lineStart = from;
  while (lineStart < to) {
    let lineEnd = answer.indexOf('\n', lineStart);
    if (lineEnd === -1 || lineEnd > to) lineEnd = to;
    let line = answer.slice(lineStart, lineEnd);
    let offset = lineStart;
    const prompt = /^\s*(?:\$|PS>|>)\s/.exec(line);
    if (keep[lineStart] === 1 || (prompted && !prompt && !continued)) {
      lineStart = lineEnd + 1;
      continue;
    }
    if (prompt) {
      offset += prompt[0].length;
      line = line.slice(prompt[0].length);
    }
    const comment = /(?:^|\s)#\s.*$/.exec(line);
    if (comment) {
      const at = offset + comment.index + comment[0].indexOf('#') + 1;
      keep.fill(1, at, offset + comment.index + comment[0].length);
      line = line.slice(0, comment.index);
    }
    // A line ending in "\" goes on with the next: `curl https://… \` then `  -H "…"`.
    continued = /\\\s*$/.test(line);
    for (const w of shellWords(line)) {
      if (/^(?:\|\||&&|[|;&])$/.test(w.text)) flush();
      else if (w.text !== '\\') command.push({ text: w.text, start: offset + w.index, end: offset + w.index + w.text.length });
    }
    if (!continued) flush();
    lineStart = lineEnd + 1;
  }
  flush();
}

/** A word of a shell command, at its offsets into the answer. */
interface Word {
  text: string;
  start: number;
  end: number;
}

function readCommand(words: readonly Word[], keep: Uint8Array, name: Namer): void {
  let i = 0;
  // Variables set before the command or exported: the name is the documented one, a number its setting.
  while (i < words.length) {
    const w = words[i]!;
    if (w.text === 'sudo' || w.text === 'export' || w.text === 'set') {
      i++;
      continue;
    }
    const assign = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(w.text);
    if (!assign) break;
    name(w.start, w.start + assign[1]!.length);
    if (/^-?\d+(?:\.\d+)?$/.test(assign[2]!)) keep.fill(1, w.start + assign[1]!.length + 1, w.end);
    i++;
  }
  const program = words[i];
  if (!program) return;
  const tool = program.text.replace(/^.*\//, '');
  if (COMMON_TOOLS.has(tool)) {
    const installs = INSTALLS.get(tool);
    if (tool === 'npx' || tool === 'pipx' || tool === 'uvx') {
      const pkg = words.slice(i + 1).find((w) => !w.text.startsWith('-'));
      if (pkg) packageName(pkg, name);
      return;
    }
    const sub = words.slice(i + 1).findIndex((w) => !w.text.startsWith('-'));
    if (!installs || sub === -1 || !installs.has(words[i + 1 + sub]!.text)) return;
    for (const w of words.slice(i + 2 + sub)) if (!w.text.startsWith('-') && !/^[.~/]/.test(w.text)) packageName(w, name);
    return;
  }
  // A program the sources document: its name, its subcommands (plain words before the first flag), its flags.
  if (/^[\w@.][\w@./-]*$/.test(program.text) && /\p{L}/u.test(program.text)) name(program.start, program.end);
  let flags = false;
  for (let j = i + 1; j < words.length; j++) {
    const w = words[j]!;
    const flag = /^(--?[A-Za-z][\w-]*)(?:=(.*))?$/.exec(w.text);
    if (flag) {
      flags = true;
      if (flag[1]!.startsWith('--')) name(w.start, w.start + flag[1]!.length);
      const value = flag[2];
      if (value !== undefined && /^-?\d+(?:\.\d+)?$/.test(value)) keep.fill(1, w.end - value.length, w.end);
      const next = words[j + 1];
      if (value === undefined && next && /^-?\d+(?:\.\d+)?$/.test(next.text)) {
        keep.fill(1, next.start, next.end);
        j++;
      }
      continue;
    }
    if (!flags && /^[a-z][\w-]*$/.test(w.text)) name(w.start, w.end);
  }
}

/** A package as installed: without quotes, a version range (`openai@4.2`, `requests>=2`) or extras (`pkg[all]`). */
function packageName(w: Word, name: Namer): void {
  let start = w.start;
  let text = w.text;
  if (/^["']/.test(text)) {
    start++;
    text = text.slice(1, -1);
  }
  const bare = /^@?[A-Za-z0-9][\w.-]*(?:\/[A-Za-z0-9][\w.-]*)*/.exec(text);
  if (bare && /\p{L}/u.test(bare[0])) name(start, start + bare[0].replace(/[.-]+$/, '').length);
}

const LEX_RE =
  /(?<comment>\/\/[^\n]*|\/\*[\s\S]*?\*\/|#[^\n]*)|(?<string>[rbuf]{0,2}(?:"{3}[\s\S]*?"{3}|'{3}[\s\S]*?'{3}|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`))|(?<number>\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?<ident>[\p{L}_$][\p{L}\p{N}_$]*)|(?<punct>=>|==|!=|<=|>=|:=|\*\*|\+=|-=|\.\.\.|[^\s\p{L}\p{N}_])/uy;

/** LEX_RE without strings and block comments: what it matches where none of those closes in the block. */
const LEX_PLAIN_RE = /(?<comment>\/\/[^\n]*|#[^\n]*)|(?<number>\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?<ident>[\p{L}_$][\p{L}\p{N}_$]*)|(?<punct>=>|==|!=|<=|>=|:=|\*\*|\+=|-=|\.\.\.|[^\s\p{L}\p{N}_])/uy;
const STRING_OPEN_RE = /[rbuf]{0,2}("""|'''|["'`])/y;

interface Closers {
  /** Where `token` next starts at or after `from`, or -1. */
  next(token: string, from: number): number;
  /** Where the next `quote` at or after `from` not escaped by a backslash is, or -1 (a backslash run before a quote counts). */
  unescaped(quote: string, from: number): number;
}

/**
 * Where a string or comment opened in `text` closes, found by scans that each start past the last one:
 * an unclosed quote or comment is looked for once, not from each place it could open (a block of `/* /* /* …` would be scanned to its end from each).
 */
function closers(text: string): Closers {
  const found = new Map<string, { from: number; at: number }>();
  const memo = (kind: string, from: number, find: () => number): number => {
    const last = found.get(kind);
    if (last !== undefined && from >= last.from && (last.at === -1 || last.at >= from)) return last.at;
    const at = find();
    found.set(kind, { from, at });
    return at;
  };
  return {
    next: (token: string, from: number) => memo(token, from, () => text.indexOf(token, from)),
    unescaped: (quote: string, from: number) =>
      memo(`\\${quote}`, from, () => {
        for (let q = text.indexOf(quote, from); q !== -1; q = text.indexOf(quote, q + 1)) {
          let run = 0;
          while (text[q - 1 - run] === '\\') run++;
          if (run % 2 === 0) return q;
        }
        return -1;
      }),
  };
}

/**
 * How LEX_RE reads `answer` at `i`, given where things close: a comment mark in a language whose comments are not
 * so, or a string or comment that does not close in the block, is settled here without LEX_RE's scan to the end.
 * Returns the lexeme's end and whether it is a string, or undefined to let LEX_RE read it.
 */
function settled(answer: string, i: number, to: number, hash: boolean, close: Closers): { end: number; kind: 'punct' | 'string' | 'plain' } | undefined {
  const c = answer[i]!;
  if (c === '#') return hash ? undefined : { end: i + 1, kind: 'punct' };
  if (c === '/' && answer[i + 1] === '/') return hash || (i > 0 && !/\s/.test(answer[i - 1]!)) ? { end: i + 1, kind: 'punct' } : undefined;
  if (c === '/' && answer[i + 1] === '*') {
    if (hash) return { end: i + 1, kind: 'punct' };
    const at = close.next('*/', i + 2);
    return at !== -1 && at + 2 <= to ? undefined : { end: i + 1, kind: 'punct' };
  }
  STRING_OPEN_RE.lastIndex = i;
  const open = STRING_OPEN_RE.exec(answer);
  if (!open) return undefined;
  const quote = open[1]!;
  const p = i + open[0].length - quote.length;
  if (quote.length === 3) {
    const at = close.next(quote, p + 3);
    if (at !== -1) return at + 3 <= to ? undefined : { end: i + 1, kind: 'punct' };
    // No closing triple quote: LEX_RE reads its first two quotes as an empty string.
    return { end: p + 2, kind: 'string' };
  }
  const at = close.unescaped(quote, p + 1);
  if (quote === '`') {
    if (at === -1) return { end: i, kind: 'plain' };
    return at < to ? undefined : { end: i + 1, kind: 'punct' };
  }
  const nl = close.next('\n', p + 1);
  if (at === -1 || (nl !== -1 && nl < at)) return { end: i, kind: 'plain' };
  return at < to ? undefined : { end: i + 1, kind: 'punct' };
}

const DEFINERS = /^(?:def|function|fn|func|fun)$/;
type Context = Pick<Lexeme, 'within' | 'common' | 'call' | 'callee'>;
const TOP: Context = { within: '', common: false, call: false, callee: undefined };

/** The lines of a block of code as lexemes (a multi-line string or comment is on the line it opens). */
function lexLines(answer: string, from: number, to: number, lang: string, close: Closers): Lexeme[][] {
  const hash = HASH_COMMENT_LANGS.has(lang) || (lang === '' && /^\s*#\s/m.test(answer.slice(from, to)));
  const lines: Lexeme[][] = [[]];
  const stack: Context[] = [];
  let i = from;
  while (i < to) {
    const c = answer[i]!;
    if (c === '\n') {
      lines.push([]);
      i++;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r') {
      i++;
      continue;
    }
    const known = settled(answer, i, to, hash, close);
    if (known !== undefined && known.kind !== 'plain') {
      lines[lines.length - 1]!.push({ kind: known.kind, start: i, end: known.end, text: answer.slice(i, known.end), ...(stack[stack.length - 1] ?? TOP) });
      i = known.end;
      continue;
    }
    const re = known === undefined ? LEX_RE : LEX_PLAIN_RE;
    re.lastIndex = i;
    const m = re.exec(answer);
    // Nothing past the block's fence is its own (an unclosed string or comment ends with the block).
    if (!m || m[0].length === 0 || i + m[0].length > to) {
      if (m && m[0].length > 0) lines[lines.length - 1]!.push({ kind: 'punct', start: i, end: i + 1, text: answer[i]!, ...(stack[stack.length - 1] ?? TOP) });
      i++;
      continue;
    }
    const g = m.groups!;
    let kind: Lexeme['kind'] = g.comment !== undefined ? 'comment' : g.string !== undefined ? 'string' : g.number !== undefined ? 'number' : g.ident !== undefined ? 'ident' : 'punct';
    let end = i + m[0].length;
    // "#" opens a comment only where the language says so ("#include", "#[derive]" are code); "//" only after white
    // space, in a language whose comments are not "#" (`url: https://…` in YAML is no comment).
    const slashes = m[0].startsWith('//');
    if (kind === 'comment' && (slashes ? hash || (i > 0 && !/\s/.test(answer[i - 1]!)) : m[0].startsWith('#') !== hash)) {
      kind = 'punct';
      end = i + 1;
    }
    const text = answer.slice(i, end);
    const line = lines[lines.length - 1]!;
    const here = stack[stack.length - 1] ?? TOP;
    line.push({ kind, start: i, end, text, ...here });
    if (kind === 'punct') {
      if (text === '(') {
        const before = line[line.length - 2];
        const definer = line[line.length - 3];
        const def = (before?.kind === 'ident' && definer !== undefined && DEFINERS.test(definer.text)) || (before !== undefined && DEFINERS.test(before.text));
        // The call's root: `requests` of `requests.post(`.
        let root = line.length - 2;
        while (line[root - 1]?.text === '.' && line[root - 2]?.kind === 'ident') root -= 2;
        const callee = line[root];
        const bare = callee?.kind === 'ident' && line[root - 1]?.text !== '.';
        stack.push({
          within: def ? 'def' : '(',
          common: bare && BUILTINS.has(callee.text),
          call: callee?.kind === 'ident',
          callee: bare && root === line.length - 2 ? callee.text : undefined,
        });
      } else if (text === '{' || text === '[') stack.push({ ...here, within: text });
      else if (text === ')' || text === '}' || text === ']') stack.pop();
    }
    i = end;
  }
  return lines;
}

/** Lexemes looked at for the names one declaration or one arrow function lists: the work of a line stays linear. */
const MAX_LISTED = 64;

/**
 * Collects the names a line defines: assigned, declared, a function's parameters, an import's names and aliases,
 * a loop's variables.
 */
function definitions(line: readonly Lexeme[], defined: Set<string>, own: Set<string>, config: boolean): void {
  if (config) return;
  const add = (name: string) => {
    defined.add(name);
    own.add(name);
  };
  const code = line.filter((l) => l.kind !== 'comment');
  const imports = code[0]?.text === 'import' || code[0]?.text === 'from';
  for (let k = 0; k < code.length; k++) {
    const t = code[k]!;
    if (t.kind !== 'ident' || KEYWORDS.has(t.text)) continue;
    const prev = code[k - 1];
    const next = code[k + 1];
    if (imports) {
      if (prev?.text !== '.') defined.add(t.text);
      continue;
    }
    if (t.within === 'def') {
      if (prev?.text !== '.') add(t.text);
      continue;
    }
    const declares = prev?.kind === 'ident' && /^(?:const|let|var|def|function|class|fn|func|fun|struct|interface|type|enum|as|val|trait|for|catch|lambda)$/.test(prev.text);
    const assigned = next?.kind === 'punct' && /^(?:=|:=|\+=|-=)$/.test(next.text) && t.within !== '(' && prev?.text !== '.';
    if (declares || assigned || (next?.text === '=>' && prev?.text !== '.')) add(t.text);
    // The names a declaration or a loop lists: `const { data, error } =`, `for key, value in`, `lambda a, b:`.
    if (/^(?:const|let|var|for|lambda)$/.test(t.text)) {
      for (let j = k + 1; j < Math.min(code.length, k + MAX_LISTED); j++) {
        const u = code[j]!;
        if (u.text === '=' || u.text === 'in' || u.text === 'of' || (u.text === ':' && t.text !== 'const' && t.text !== 'let' && t.text !== 'var')) break;
        if (u.kind === 'ident' && !KEYWORDS.has(u.text) && code[j - 1]?.text !== ':' && code[j - 1]?.text !== '.') add(u.text);
      }
    }
  }
  // A tuple's names assigned at once: `client, err := acme.NewClient(key)`, `a, b = pair`.
  const assign = code.findIndex((l) => l.kind === 'punct' && (l.text === '=' || l.text === ':=') && l.within !== '(');
  if (assign > 1 && code.slice(0, assign).every((l, j) => (j % 2 === 0 ? l.kind === 'ident' : l.text === ','))) {
    for (let j = 0; j < assign; j += 2) add(code[j]!.text);
  }
  // An arrow function's parameters: "(a, b) =>".
  for (let k = 0; k < code.length; k++) {
    if (code[k]!.text !== '=>' || code[k - 1]?.text !== ')') continue;
    let depth = 0;
    for (let j = k - 1; j >= Math.max(0, k - MAX_LISTED); j--) {
      const u = code[j]!;
      if (u.text === ')') depth++;
      else if (u.text === '(' && --depth === 0) break;
      else if (u.kind === 'ident') add(u.text);
    }
  }
}

/** Members every language's values have (`append`, `map`, `json`, `length`): no library's claim. */
const VALUE_METHODS = new Set(
  `append extend pop push shift unshift map filter reduce forEach join split strip lstrip rstrip lower upper replace
format items keys values get has add remove length size then catch finally json text toString toFixed toUpperCase
toLowerCase slice splice includes indexOf startsWith endsWith trim update copy sort reverse count find findIndex some
every concat encode decode read write close readlines readline flush iter next send hex insert clear index
setdefault isdigit isalpha title capitalize upper log error warn info debug stringify parse assign entries fromEntries
isArray now floor ceil round random max min abs`.split(/\s+/),
);

/** Reads one line of code: which of its lexemes are names to check, numbers to keep, prose (comments) to read. */
function readCodeLine(line: readonly Lexeme[], defined: ReadonlySet<string>, own: ReadonlySet<string>, config: boolean, keep: Uint8Array, name: Namer): void {
  const code = line.filter((l) => l.kind !== 'comment');
  for (const l of line) {
    if (l.kind === 'comment') {
      // Comments are prose: read as the answer's other sentences are, without their marks.
      const text = l.text.replace(/^(?:\/\/+|\/\*+|#+)/, '').replace(/\*+\/$/, '');
      const at = l.start + l.text.indexOf(text);
      keep.fill(1, at, at + text.length);
    }
  }
  if (code[0]?.text === 'import' || code[0]?.text === 'from' || (code[0]?.text === 'export' && code.some((l) => l.text === 'from'))) {
    readImport(code, name);
    return;
  }
  for (let k = 0; k < code.length; k++) {
    const t = code[k]!;
    const prev = code[k - 1];
    const next = code[k + 1];
    // A key or an option given a value ("max_tokens=100", "{ maxRetries: 2 }", "timeout: 30", `"model": …`).
    const quoted = t.kind === 'string' && /^["'][\w.-]+["']$/.test(t.text);
    const key =
      (t.kind === 'ident' || quoted) &&
      next?.kind === 'punct' &&
      prev?.text !== '?' &&
      prev?.text !== '.' &&
      ((next.text === ':' && (config || t.within === '{')) || (next.text === '=' && (config || t.within === '(')));
    // A key is an option of the library's when it is passed to a call of it: not to a built-in's or a common
    // library's (`fetch(url, { method })`), not to the snippet's own function or class (`Report(name=…)`), not in a
    // literal of the snippet's data (`rows = [{"id": i}]`). A configuration's keys are all settings.
    if (key && !config && (t.common || !t.call || (t.callee !== undefined && own.has(t.callee)))) {
      k += 1;
      continue;
    }
    if (key) {
      const quote = quoted ? 1 : 0;
      if (quote || !KEYWORDS.has(t.text)) name(t.start + quote, t.end - quote);
      // The value a setting or a library's option is given, when it is one word ("log_level: verbose",
      // `level="verbose"`): one of the values the documentation lists, checked whole as a key is, so a value no
      // source names is flagged; a number passed in code ("max_tokens=100") is the example's own (below).
      const word = SECRET_KEY_RE.test(t.text) ? undefined : settingValue(code, k + 2, config);
      if (word) {
        name(word.start, word.end);
        // Read once, as one name ("image: postgres:16" is not also a key "postgres" set to 16).
        k = word.last;
        continue;
      }
      // A configuration's number is a setting to check ("port: 8787"); a number a snippet passes ("max_tokens=100",
      // "{ timeout: 5000 }") is the example's choice.
      const value = code[k + 2];
      const negative = value?.text === '-' && code[k + 3]?.kind === 'number';
      const number = negative ? code[k + 3] : value;
      if (config && number?.kind === 'number') keep.fill(1, negative ? value!.start : number.start, number.end);
      // So is one quoted ("port: \"8080\"").
      if (config && value?.kind === 'string' && code.length === k + 3 && /^["']-?\d+(?:\.\d+)?["']$/.test(value.text)) keep.fill(1, value.start + 1, value.end - 1);
      k += 1;
      continue;
    }
    if (config) {
      // A section's name ("[server]", "[tool.poetry]", "[[servers]]") is the configuration's schema, as a key is.
      if (k === 0 && t.text === '[') {
        let first = 1;
        while (code[first]?.text === '[') first++;
        let last = first;
        while (code[last + 1]?.text === '.' && code[last + 2]?.kind === 'ident') last += 2;
        if (code[first]?.kind === 'ident' && code[last + 1]?.text === ']') name(code[first]!.start, code[last]!.end);
        k = code.length;
        continue;
      }
      // A list's item ("- gpt-4o") is a value of the key above it.
      if (k === 0 && t.text === '-' && code.length > 1) {
        const word = settingValue(code, 1, true);
        if (word) name(word.start, word.end);
      }
      // Other values are the app's own.
      continue;
    }
    if (t.kind === 'string') {
      // The package a require names: `require('express')`.
      const pkg = /^["']([@\w./-]+)["']$/.exec(t.text);
      if (pkg && prev?.text === '(' && code[k - 2]?.text === 'require' && !pkg[1]!.startsWith('.')) name(t.start + 1, t.end - 1);
      continue;
    }
    // Dunder names (`__name__`, `__init__`) are the language's.
    if (t.kind !== 'ident' || KEYWORDS.has(t.text) || t.within === 'def' || /^__\w+__$/.test(t.text)) continue;
    if (prev?.text === '.' && (code[k - 2]?.kind === 'string' || code[k - 2]?.kind === 'number')) continue;
    // A chain of members: `client.chat.completions.create`, `payments.charges.refund`.
    let last = k;
    while (code[last + 1]?.text === '.' && code[last + 2]?.kind === 'ident') last += 2;
    const member = prev?.text === '.';
    const rooted = !member && (defined.has(t.text) || t.text === 'self' || t.text === 'this');
    const builtin = !member && BUILTINS.has(t.text);
    const call = code[last + 1]?.text === '(';
    // Members named as the library's: from the first after a root of the snippet's own, else from the root.
    const from = rooted || builtin ? k + 2 : k;
    if (builtin || from > last || last === k) {
      if (!builtin && !rooted && (call || /[a-z][A-Z]|[A-Za-z0-9]_[A-Za-z0-9]|^[A-Z]/.test(t.text)) && prev?.text !== '@') {
        // A function or class the snippet calls without defining it (`load_dotenv()`), or a name of a library's
        // shape (`NOT_GIVEN`, `HTTPException`).
        name(t.start, t.end, undefined, true);
      }
      k = last;
      continue;
    }
    // Methods every value has are no claim of the library's: `results.append`, `response.json`.
    let core = last;
    while (core >= from && VALUE_METHODS.has(code[core]!.text)) core -= 2;
    if (core >= from) name(code[from]!.start, code[last]!.end, core === last ? undefined : textOf(code, from, core), true);
    k = last;
  }
}

/** Values that say nothing a source could back: YAML's and TOML's booleans and nulls, placeholders ("<your-key>"). */
const PLAIN_VALUES = new Set(['true', 'false', 'yes', 'no', 'on', 'off', 'null', 'none', 'nil', '~']);
const PLACEHOLDER_RE = /^<.*>$|^\$|\byour\b|^my[-_]?|example|^(?:foo|bar|baz|test|demo|sample)\b|^x{3,}|changeme|\.\.\./i;
/** Keys whose value is the user's own secret, never the documentation's: `password`, `api_key`, `SECRET_TOKEN`. */
const SECRET_KEY_RE = /pass(?:word|wd)?|secret|token|api_?key|credential/i;

/**
 * The one-word value that lexemes `from`… of a line give a key (all that is left of the line, written without spaces,
 * or one quoted string of one word), as the characters to read: "verbose", "us-east-1", "gpt-4o". Undefined for
 * none, a phrase, a boolean or a placeholder; in code, for anything but a quoted string (a variable, a number: the
 * example's choices). A number in a configuration is kept already.
 */
function settingValue(code: readonly Lexeme[], from: number, config: boolean): { start: number; end: number; last: number } | undefined {
  const first = code[from];
  if (first === undefined) return undefined;
  let to = from;
  if (config) {
    while (code[to + 1] !== undefined && code[to + 1]!.start === code[to]!.end) to++;
    // A key's value runs to the line's end; a value in an inline map or list ("{a: 1, b: 2}") is left alone.
    if (to !== code.length - 1) return undefined;
  } else if (first.kind !== 'string' || first.within !== '(' || (code[from + 1] !== undefined && code[from + 1]!.text !== ',' && code[from + 1]!.text !== ')')) {
    // In code, a keyword argument's (`region="eu-west-1"`); a value in an object or a dictionary is as often the
    // snippet's data (`{"role": "user", "content": "Hello"}`).
    return undefined;
  }
  let start = first.start;
  let end = code[to]!.end;
  const quoted = to === from && first.kind === 'string';
  if (quoted) {
    start++;
    end--;
  }
  const text = textOf(code, from, to);
  const word = quoted ? text.slice(1, -1) : text;
  if (!/^[\p{L}_][\p{L}\p{N}_.:@/+-]*$/u.test(word) || PLAIN_VALUES.has(word.toLowerCase()) || PLACEHOLDER_RE.test(word)) return undefined;
  return end > start ? { start, end, last: to } : undefined;
}

/**
 * Whether an untagged block's lines are all settings: "key: value", "key = value", "[section]", "- item", comments
 * ("#", ";") and blank lines, with at least one "key: value" or "key = value" and no line of code (a call, a bracket).
 */
function configBody(body: string): boolean {
  let settings = 0;
  for (const raw of body.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';') || /^\[{1,2}[\w.-]+\]{1,2}$/.test(line) || /^- [^:(){}]*$/.test(line)) continue;
    if (!/^[\w.-]+\s*(?::(?:\s|$)|=)[^(){};]*$/.test(line)) return false;
    settings++;
  }
  return settings > 0;
}

function textOf(code: readonly Lexeme[], from: number, to: number): string {
  let s = '';
  for (let j = from; j <= to; j++) s += code[j]!.text;
  return s;
}

/**
 * An import statement's names: the module (`from openai import …`, `import numpy as np`, `from "openai"`) and the
 * names imported from it (`OpenAI`, `{ PaymentsClient }`), not the aliases the snippet gives them (`np`, a default
 * import's binding).
 */
function readImport(code: readonly Lexeme[], name: Namer): void {
  // A relative import (`from .models import Order`) takes the app's own names.
  if (code[0]!.text === 'from' && code[1]?.kind === 'punct') return;
  const js = code.some((l) => l.kind === 'string');
  let braces = 0;
  for (let j = 0; j < code.length; j++) {
    const t = code[j]!;
    if (t.text === '{') braces++;
    else if (t.text === '}') braces--;
    if (t.kind === 'string') {
      const pkg = /^["']([@\w./-]+)["']$/.exec(t.text);
      if (pkg && !pkg[1]!.startsWith('.')) name(t.start + 1, t.end - 1);
      continue;
    }
    if (t.kind !== 'ident' || KEYWORDS.has(t.text) || t.text === 'type') continue;
    if (code[j - 1]?.text === 'as' || code[j - 1]?.text === '.') continue;
    // A dotted module: `from a.b import c`, `import a.b`; a relative one (`from .models import …`) is the app's.
    let last = j;
    while (code[last + 1]?.text === '.' && code[last + 2]?.kind === 'ident') last += 2;
    // JavaScript's default or namespace import binds a name of the snippet's choosing; the standard library's
    // modules (`import os`, `from typing import …`) are no source's claim.
    if (!(js && braces === 0) && !(j === 1 && BUILTINS.has(t.text))) name(t.start, code[last]!.end);
    if (j === 1 && BUILTINS.has(t.text) && code[0]!.text === 'from') return;
    j = last;
  }
}
