import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkGrounding } from './check.js';
import { readCodeBlocks } from './code-blocks.js';
import { splitClaims } from './claims.js';
import { buildSourceIndex } from './source-index.js';
import { PassageSearch, questionTerms, supportClaim } from './support.js';
import { stem } from './tokenize.js';

// A library's documentation as a RAG source, and a coding assistant's answer built from its documented API.
const JS_DOCS = `# Acme Payments SDK for Node.js

Install the SDK with \`npm install @acme/payments\`.

\`\`\`js
import { PaymentsClient } from '@acme/payments';

const client = new PaymentsClient({ apiKey: process.env.ACME_API_KEY, maxRetries: 2 });
const charge = await client.charges.create({ amount: 1999, currency: 'usd' });
console.log(charge.id);
\`\`\`

The REST endpoint is https://api.acme.io/v1/charges/{id}. The \`timeout\` option sets the request timeout in milliseconds (default 30000). \`client.charges.retrieve(id)\` returns a charge by its id. Set \`ACME_API_KEY\` in your environment.`;

const JS_ANSWER = `Here's how to create a charge and fetch it back:

\`\`\`bash
npm install @acme/payments
\`\`\`

\`\`\`javascript
import { PaymentsClient } from "@acme/payments";

const payments = new PaymentsClient({ apiKey: process.env.ACME_API_KEY, timeout: 30000 });

// The charge is returned by its id.
async function chargeAndFetch(orderTotal) {
  const created = await payments.charges.create({ amount: orderTotal, currency: "usd" });
  const fetched = await payments.charges.retrieve(created.id);
  return fetched;
}
\`\`\`

The \`timeout\` option is in milliseconds.`;

const PY_DOCS = `Quickstart

Install the library with pip:

    pip install weatherly

Create a client with your API key and call \`client.forecast.daily(city, days=7)\`; \`days\` may be 1 to 14. The \`units\` parameter is "metric" (default) or "imperial".

\`\`\`python
from weatherly import Weatherly

client = Weatherly(api_key=os.environ["WEATHERLY_API_KEY"])
forecast = client.forecast.daily("Oslo", days=3, units="metric")
for day in forecast.days:
    print(day.date, day.max_temp)
\`\`\`

The client retries failed requests up to 3 times (\`max_retries=3\`). Run \`weatherly-cli export --format csv --days 14\` to write a forecast to a file.`;

const PY_ANSWER = `You can get a week of forecasts like this:

\`\`\`python
import os
from weatherly import Weatherly

def weekly_highs(city_name: str) -> list[float]:
    """Return the highest temperature of each day of the coming week."""
    client = Weatherly(api_key=os.environ["WEATHERLY_API_KEY"], max_retries=3)
    result = client.forecast.daily(city_name, days=7, units="imperial")
    highs = []
    for entry in result.days:
        highs.append(entry.max_temp)  # each day's max_temp
    return highs

if __name__ == "__main__":
    print(weekly_highs("Bergen"))
\`\`\`

Or from the shell:

\`\`\`bash
$ pip install weatherly
$ export WEATHERLY_API_KEY=sk-123
$ weatherly-cli export --format csv --days 14 > bergen.csv
\`\`\`
`;

const TASKQ_DOCS = `# Taskq

Taskq is a job queue for Python. Create a queue with \`Queue("redis://localhost:6379/0")\`, register a function with the \`@queue.task(retries=3)\` decorator and enqueue it with \`my_task.delay(*args)\`, which returns a \`Job\`. \`job.wait(timeout=30)\` blocks until the result is ready and raises \`TaskTimeout\` when it is not. Run workers with \`taskq worker --concurrency 4\`.`;


// Classes, decorators, the snippet's own data and calls of its own functions, built-ins and the standard library.
const TASKQ_ANSWER = `\`\`\`python
import logging
from dataclasses import dataclass
from taskq import Queue, TaskTimeout

queue = Queue("redis://localhost:6379/0")
log = logging.getLogger(__name__)


@dataclass
class Report:
    name: str
    rows: list[dict]


@queue.task(retries=3)
def build_report(name: str) -> Report:
    rows = [{"id": i, "value": i * 2} for i in range(10)]
    return Report(name=name, rows=rows)


class ReportService:
    def __init__(self, timeout: int = 30):
        self.timeout = timeout

    def run(self, name):
        job = build_report.delay(name)
        try:
            report = job.wait(timeout=self.timeout)
        except TaskTimeout:
            log.warning(f"report {name} timed out")
            return None
        with open(f"{name}.json", "w") as fh:
            fh.write(str(report))
        return report
\`\`\`

Start a worker:

\`\`\`sh
taskq worker --concurrency 4
\`\`\``;

describe('a code block is checked by the names it takes from the sources, not read as words', () => {
  // docs, answer, what the answer's edit is, flagged (as written)
  it.each<[string, string, [string, string] | undefined, string[]]>([
    [JS_DOCS, JS_ANSWER, undefined, []],
    [PY_DOCS, PY_ANSWER, undefined, []],
    // An invented method, option, package, keyword argument, flag; a wrong number given to an option or a flag.
    [JS_DOCS, JS_ANSWER, ['charges.retrieve', 'charges.fetchOne'], ['charges.fetchOne']],
    [JS_DOCS, JS_ANSWER, ['timeout: 30000', 'retryDelay: 30000'], ['retryDelay']],
    [JS_DOCS, JS_ANSWER, ['install @acme/payments', 'install @acme/payments-sdk'], ['@acme/payments-sdk']],
    [JS_DOCS, JS_ANSWER, ['from "@acme/payments"', 'from "@acme/pay"'], ['@acme/pay']],
    [PY_DOCS, PY_ANSWER, ['forecast.daily(city_name', 'forecast.weekly(city_name'], ['forecast.weekly']],
    [PY_DOCS, PY_ANSWER, ['max_retries=3', 'retry_backoff=3'], ['retry_backoff']],
    // A number a snippet passes is the example's choice; one set in a configuration or given to a flag is checked.
    [JS_DOCS, JS_ANSWER, ['timeout: 30000', 'timeout: 5000'], []],
    [PY_DOCS, PY_ANSWER, ['days=7', 'days=21'], []],
    [PY_DOCS, PY_ANSWER, ['--format csv', '--output csv'], ['--output']],
    [PY_DOCS, PY_ANSWER, ['--days 14', '--days 30'], ['30']],
    [PY_DOCS, PY_ANSWER, ['pip install weatherly', 'pip install weatherly-sdk'], ['weatherly-sdk']],
    [PY_DOCS, PY_ANSWER, ['from weatherly import Weatherly', 'from weatherly import WeatherClient'], ['WeatherClient']],
    [JS_DOCS, JS_ANSWER, ['return fetched;', 'return verifySignature(fetched);'], ['verifySignature']],
    [JS_DOCS, JS_ANSWER.replace('return fetched;', 'return fetch("https://api.acme.io/v1/charges/" + created.id);'), ['/v1/', '/v2/'], ['https://api.acme.io/v2/charges/']],
    [TASKQ_DOCS, TASKQ_ANSWER, undefined, []],
    // A method named by a plain word is found only where a source writes it as code (`job.wait(`), not in prose.
    [TASKQ_DOCS, TASKQ_ANSWER, ['job.wait(', 'job.result('], ['result']],
    [TASKQ_DOCS, TASKQ_ANSWER, ['except TaskTimeout', 'except TaskExpired'], ['TaskExpired']],
    [TASKQ_DOCS, TASKQ_ANSWER, ['retries=3', 'max_retries=3'], ['max_retries']],
    [TASKQ_DOCS, TASKQ_ANSWER, ['--concurrency 4', '--workers 4'], ['--workers']],
    // A comment is prose, read as such.
    [PY_DOCS, PY_ANSWER, ["# each day's max_temp", '# in degrees Kelvin'], ['degrees', 'Kelvin']],
  ])('%# %$', (_docs, answer, edit, flagged) => {
    const edited = edit ? answer.replace(edit[0], edit[1]) : answer;
    if (edit) expect(edited).not.toBe(answer);
    const r = checkGrounding({ sources: [_docs], question: 'How do I use it?', answer: edited });
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
    expect(r.grounded).toBe(flagged.length === 0);
  });

  it('the names, numbers and comments kept are at their offsets; the snippet\'s own names, keywords and syntax are not read', () => {
    const r = readCodeBlocks(PY_ANSWER, stem);
    expect(r.text).toHaveLength(PY_ANSWER.length);
    for (const n of r.names) expect(PY_ANSWER.slice(n.start, n.end)).toBe(n.name);
    const names = r.names.map((n) => n.name);
    expect(names).toEqual(expect.arrayContaining(['weatherly', 'Weatherly', 'api_key', 'max_retries', 'forecast.daily', 'days', 'units', 'max_temp', 'WEATHERLY_API_KEY', 'weatherly-cli', 'export', '--format', '--days']));
    for (const own of ['weekly_highs', 'city_name', 'client', 'result', 'highs', 'entry', 'os', 'append', 'def', 'import', 'str', '__name__', '__main__', 'Bergen', 'sk-123', 'bergen.csv', 'pip']) {
      expect(names).not.toContain(own);
    }
    const read = r.text.replace(/[\s.]+/g, ' ').trim();
    // Left for the words: the prose before and between the blocks, the comment, the number given to a flag.
    expect(read).toBe("You can get a week of forecasts like this: ```python each day's max_temp ``` Or from the shell: ```bash 14 ```");
  });

  it('a block nested in a list item (indented) is read as code', () => {
    const answer = `1. Install the library:\n\n    \`\`\`bash\n    pip install weatherly\n    \`\`\`\n\n2. Fetch the forecast:\n\n    \`\`\`python\n    from weatherly import Weatherly\n    forecast = Weatherly(api_key=key).forecast.daily("Oslo", days=3)\n    \`\`\``;
    expect(checkGrounding({ sources: [PY_DOCS], answer }).flaggedSpans).toEqual([]);
    const wrong = checkGrounding({ sources: [PY_DOCS], answer: answer.replace('forecast.daily', 'forecast.hourly') });
    expect(wrong.flaggedSpans.map((s) => s.text)).toEqual(['forecast.hourly']);
  });

  it('a shell command goes on over a line ending in a backslash; a session\'s output is not a command', () => {
    const docs = 'Deploy with `acme deploy --region eu-west-1 --replicas 3`.';
    const answer = '```console\n$ acme deploy \\\n    --region eu-west-1 \\\n    --replicas 3\nDeployed 3 replicas to eu-west-1 in 42s\n```';
    expect(checkGrounding({ sources: [docs], answer }).flaggedSpans).toEqual([]);
    const wrong = checkGrounding({ sources: [docs], answer: answer.replace('--replicas', '--instances') });
    expect(wrong.flaggedSpans.map((s) => s.text)).toEqual(['--instances']);
  });

  it('JSON in a fence is data, read as a JSON answer is: its values are claims, its keys are not', () => {
    const docs = 'Acme Tools was founded in 1999 in Dayton. Its CEO is Ann Lee.';
    const answer = 'Here is the extracted record:\n\n```json\n{\n  "company": "Acme Tools",\n  "founded_year": 1999,\n  "ceo": "Ann Lee"\n}\n```';
    expect(checkGrounding({ sources: [docs], answer }).flaggedSpans).toEqual([]);
    const swapped = (from: string, to: string) => checkGrounding({ sources: [docs], answer: answer.replace(from, to) }).flaggedSpans.map((s) => s.text);
    expect(swapped('Ann Lee', 'Bob Ray')).toEqual(['Bob', 'Ray']);
    expect(swapped('1999', '1998')).toEqual(['1998']);
  });

  it('a query is checked by the tables and columns it names, against the schema in the sources', () => {
    const docs = 'The `users` table has the columns `id`, `email`, `plan` and `created_at`. The `orders` table has `id`, `user_id`, `total_cents` and `placed_at`.';
    const answer = "```sql\n-- Total of the orders per plan\nSELECT u.plan, SUM(o.total_cents) AS revenue\nFROM users u\nJOIN orders o ON o.user_id = u.id\nWHERE o.placed_at >= '2024-01-01'\nGROUP BY u.plan\nORDER BY revenue DESC;\n```";
    expect(checkGrounding({ sources: [docs], answer }).flaggedSpans.map((s) => s.text)).toEqual([]);
    const wrong = checkGrounding({ sources: [docs], answer: answer.replace('o.placed_at', 'o.ordered_at') });
    expect(wrong.flaggedSpans.map((s) => s.text)).toEqual(['ordered_at']);
  });

  it('without a fenced block the answer is read as before', () => {
    const answer = 'Call `client.forecast.daily` with days=7.';
    expect(readCodeBlocks(answer, stem)).toEqual({ text: answer, names: [] });
  });

  it('a configuration block (YAML, TOML, .env) is checked by its keys and the numbers set', () => {
    const docs = 'Configure the server in `svc.yaml`: `port` (default 8787), `grounding.threshold` (0.5) and `retention_days` (30).';
    const ok = '```yaml\nport: 8787\nretention_days: 30\n```';
    expect(checkGrounding({ sources: [docs], answer: ok }).flaggedSpans).toEqual([]);
    const wrong = checkGrounding({ sources: [docs], answer: '```yaml\nport: 8080\nretention: 30\n```' });
    expect(wrong.flaggedSpans.map((s) => s.text)).toEqual(['8080', 'retention']);
  });
});

describe('a configuration is read as data: its section names, and the values it sets', () => {
  const DOCS = `Acme Gateway reads \`acme.toml\` or \`acme.yaml\`. The \`[server]\` section holds \`listen_port\` (default 8787) and \`workers\` (default 4). \`log_level\` is one of \`debug\`, \`info\` or \`warn\`. \`region\` is \`us-east-1\` or \`eu-west-1\`. \`models\` lists the models served: \`gpt-4o\`, \`gpt-4o-mini\`. \`verbose\` (a boolean) logs each request. \`acme.Gateway(name=…)\` names the gateway; \`gw.deploy(tier=…)\` takes \`pro2\` or \`basic1\`. Set \`upstream_url\` to https://api.acme.io/v1. With OpenAI's SDK (\`openai\`), \`client.chat.completions.create\` takes \`model\` and \`messages\` (each a \`role\` and \`content\`). In Compose, the \`services\` entry \`gateway\` runs the \`image\` acme/gateway:2.1 with \`environment\` \`ACME_API_KEY\`.`;
  const YAML = '```yaml\nlisten_port: 8787\nworkers: 4\nlog_level: info\nregion: "eu-west-1"\nupstream_url: https://api.acme.io/v1\nmodels:\n  - gpt-4o\n  - gpt-4o-mini\nverbose: true\n```';
  const TOML = '```toml\n[server]\nlisten_port = 8787\nworkers = 4\nlog_level = "warn"\n```';
  const INI = '```\n[server]\nlisten_port = 8787\n; the log level\nlog_level = debug\n```';
  const PY = '```python\nimport acme\n\ngw = acme.Gateway(log_level="debug", region="us-east-1", name="my gateway")\ngw.deploy(tier="pro2")\n```';
  const JS = '```js\nimport OpenAI from "openai";\nconst r = await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "Hello" }] });\n```';
  const COMPOSE = '```yaml\nservices:\n  gateway:\n    image: acme/gateway:2.1\n    environment:\n      ACME_API_KEY: sk-live-123\n```';

  // answer, what the answer's edit is, flagged (as written)
  it.each<[string, [string, string] | undefined, string[]]>([
    // A snippet made only of documented names, values and numbers is grounded.
    [YAML, undefined, []],
    [TOML, undefined, []],
    [INI, undefined, []],
    [PY, undefined, []],
    // An invented value, section, list item or port; a quoted port.
    [YAML, ['log_level: info', 'log_level: fatal'], ['fatal']],
    [YAML, ['region: "eu-west-1"', 'region: "eu-central-1"'], ['eu-central-1']],
    [YAML, ['  - gpt-4o-mini', '  - gpt-5-turbo'], ['gpt-5-turbo']],
    [YAML, ['listen_port: 8787', 'listen_port: "9090"'], ['9090']],
    [TOML, ['[server]', '[proxy]'], ['proxy']],
    [TOML, ['log_level = "warn"', 'log_level = "trace"'], ['trace']],
    // An untagged block of settings is a configuration too.
    [INI, ['listen_port = 8787', 'listen_port = 8080'], ['8080']],
    [INI, ['log_level = debug', 'log_level = trace'], ['trace']],
    [INI, ['log_level = debug', 'log_lvl = debug'], ['log_lvl']],
    // A library's option given one word in code; a phrase or a placeholder is the example's own.
    [PY, ['region="us-east-1"', 'region="ap-south-9"'], ['ap-south-9']],
    [PY, ['name="my gateway"', 'name="<your-gateway>"'], []],
    [PY, ['name="my gateway"', 'name="my-gateway"'], []],
    [PY, ['tier="pro2"', 'tier="pro3"'], ['pro3']],
    // A value in an object or a dictionary is as often the snippet's data (a message's text), and a secret is the user's.
    [JS, undefined, []],
    [COMPOSE, undefined, []],
    // A one-word value is read once, as one name, not also as a key and a number ("postgres:16").
    [COMPOSE, ['acme/gateway:2.1', 'postgres:16'], ['postgres:16']],
  ])('%# %s', (answer, edit, flagged) => {
    const edited = edit ? answer.replace(edit[0], edit[1]) : answer;
    if (edit) expect(edited).not.toBe(answer);
    const r = checkGrounding({ sources: [DOCS], question: 'How do I configure it?', answer: edited });
    expect(r.flaggedSpans.map((s) => s.text)).toEqual(flagged);
    expect(r.grounded).toBe(flagged.length === 0);
  });
});

describe('a configuration of documented settings, in any format', () => {
  const DOCS = 'The gateway reads `gateway.yaml`, `gateway.toml` or `gateway.ini`. Its `[server]` section sets `listen_port` (default 8787), `workers` (default 4) and `log_level`, one of `debug`, `info` or `warn`. Its `[cache]` section sets `backend`, `memory` or `redis`, and `ttl_seconds` (default 300).';
  const SETTINGS: Record<string, [key: string, value: string][]> = {
    server: [['listen_port', '8787'], ['workers', '4'], ['log_level', 'debug'], ['log_level', 'warn']],
    cache: [['backend', 'memory'], ['backend', 'redis'], ['ttl_seconds', '300']],
  };
  const INVENTED = ['verbose', 'memcached', 'trace', 'fastest'];
  const layouts: Record<string, (sections: [string, [string, string][]][]) => string> = {
    yaml: (ss) => '```yaml\n' + ss.map(([name, kv]) => `${name}:\n${kv.map(([k, v]) => `  ${k}: ${v}`).join('\n')}`).join('\n') + '\n```',
    toml: (ss) => '```toml\n' + ss.map(([name, kv]) => `[${name}]\n${kv.map(([k, v]) => `${k} = ${/^\d+$/.test(v) ? v : `"${v}"`}`).join('\n')}`).join('\n\n') + '\n```',
    ini: (ss) => '```\n' + ss.map(([name, kv]) => `[${name}]\n${kv.map(([k, v]) => `${k} = ${v}`).join('\n')}`).join('\n\n') + '\n```',
  };
  const config = fc.record({
    layout: fc.constantFrom(...Object.keys(layouts)),
    server: fc.subarray(SETTINGS.server!, { minLength: 1 }),
    cache: fc.subarray(SETTINGS.cache!),
    invented: fc.constantFrom(...INVENTED),
    pick: fc.nat(),
  });
  const sectionsOf = (c: { server: [string, string][]; cache: [string, string][] }): [string, [string, string][]][] =>
    c.cache.length > 0 ? [['server', c.server], ['cache', c.cache]] : [['server', c.server]];

  it('made only of documented names and values it is grounded; one value replaced by an invented one is flagged there alone, without overlaps', () => {
    fc.assert(
      fc.property(config, (c) => {
        const sections = sectionsOf(c);
        const answer = layouts[c.layout]!(sections);
        const r = checkGrounding({ sources: [DOCS], answer });
        expect(r.flaggedSpans, answer).toEqual([]);
        expect(r.grounded).toBe(true);
        const words = sections.flatMap(([, kv]) => kv).filter(([, v]) => !/^\d+$/.test(v));
        fc.pre(words.length > 0);
        const [key, value] = words[c.pick % words.length]!;
        const changed = answer.replace(new RegExp(`(${key}\\s*[:=]\\s*"?)${value}`), `$1${c.invented}`);
        const s = checkGrounding({ sources: [DOCS], answer: changed });
        expect(s.flaggedSpans.map((f) => f.text), changed).toEqual([c.invented]);
        expect(s.score).toBeLessThan(r.score);
        for (const f of s.flaggedSpans) expect(changed.slice(f.start, f.end)).toBe(f.text);
      }),
      { seed: 20261130, numRuns: 150 },
    );
  });
});

describe('bounded work in code blocks', () => {
  // A comment or a string that does not close is looked for once, not from each place it could open: scanning to
  // the answer's end from each takes 300 KB of these past the test timeout (10 s or more).
  it.each([
    ['unclosed block comments', '```js\n', '/* '],
    ['"//" after code, on one line', '```js\n', 'a//'],
    ['"#" in a language whose comments are "//"', '```js\n', 'a#'],
    ['escaped quotes on one line', '```js\n', '"\\'],
    ['unclosed template strings', '```js\n', '`\\'],
  ])('%s: read as syntax, the names after them still found', (_, fence, unit) => {
    const answer = `${fence}${unit.repeat(Math.ceil(300_000 / unit.length))}\n\`\`\`\n\n\`\`\`js\nconst c = new AcmeClient();\n\`\`\``;
    const reading = readCodeBlocks(answer, stem);
    expect(reading.text).toHaveLength(answer.length);
    expect(reading.names.map((n) => n.name)).toContain('AcmeClient');
  });
});

describe('bounded work in reading fences and shell words', () => {
  // Both were quadratic in a regex's backtracking over one long line: 0.8 s and 0.4 s at the check's 16 KB bound,
  // these long lines past the test timeout (26 s and 22 s).
  it('a long line after a fence mark that ends in a backtick opens no block', () => {
    const line = `\`\`\`${'a'.repeat(100_000)}\``;
    const answer = `${line}\n\n\`\`\`js\nconst c = new AcmeClient();\n\`\`\``;
    const reading = readCodeBlocks(answer, stem);
    expect(reading.text.slice(0, line.length)).toBe(line);
    expect(reading.names.map((n) => n.name)).toEqual(['AcmeClient']);
  });

  it('a shell line of escaped double quotes that never close is read once', () => {
    const answer = `\`\`\`bash\nacme run ${'"\\'.repeat(80_000)}\nacme deploy --region eu\n\`\`\``;
    const reading = readCodeBlocks(answer, stem);
    expect(reading.text).toHaveLength(answer.length);
    expect(reading.names.map((n) => n.name)).toEqual(expect.arrayContaining(['acme', 'run', 'deploy', '--region']));
  });
});

describe('bounded work in looking names up', () => {
  // Each name of a snippet is looked for in the question once per check, as in the sources: looked for at each of its
  // places, a name written 16,000 times against a question that holds it 13,000 times (inside longer names) took
  // 200 million steps, past the test timeout (1.6 s at the check's 16 KB bound, on the grounding thread).
  it('a name repeated in a snippet and inside a long question is looked for once', () => {
    const answer = `\`\`\`js\n${'x.y '.repeat(16_000)}\n\`\`\``;
    const question = 'zx.yz'.repeat(13_000);
    const [index, terms, search] = [buildSourceIndex([JS_DOCS]), questionTerms(question), new PassageSearch()];
    const supports = splitClaims(answer).map((claim) => supportClaim(index, terms, claim, search, [JS_DOCS]));
    const names = supports.flatMap((s) => s.terms.filter((t) => t.term.link?.name === 'x.y'));
    expect(names.length).toBeGreaterThan(10_000);
    expect(names.every((t) => t.support === 0)).toBe(true);
  });
});
