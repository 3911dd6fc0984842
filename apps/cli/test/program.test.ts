import { CommanderError } from 'commander';
import { describe, expect, it } from 'vitest';
import { makeProgram } from '../src/program.js';
import type { CliError } from '../src/errors.js';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) }, out, err };
}

async function parse(args: string[]): Promise<{ error: CommanderError; out: string; err: string }> {
  const { io, out, err } = capture();
  const program = makeProgram(io, { exitOverride: true });
  const error = await program.parseAsync(['node', 'svc-cli', ...args]).then(
    () => {
      throw new Error('expected commander to stop');
    },
    (e: unknown) => e as CommanderError,
  );
  expect(error).toBeInstanceOf(CommanderError);
  return { error, out: out.join(''), err: err.join('') };
}

describe('svc-cli --help', () => {
  it.each([
    [[]],
    [['webhooks']],
    [['webhooks', 'test']],
    [['webhooks', 'check-receiver']],
    [['listen']],
    [['replay']],
    [['deliveries']],
    [['deliveries', 'list']],
    [['deliveries', 'show']],
    [['deliveries', 'redeliver']],
    [['chat']],
  ])('%j has examples and the global options', async (path) => {
    const { error, out } = await parse([...path, '--help']);
    expect(error.code).toBe('commander.helpDisplayed');
    expect(error.exitCode).toBe(0);
    expect(out).toContain('Examples:');
    expect(out).toMatch(/\$ svc-cli /);
    expect(out).toContain('--base-url <url>');
    expect(out).toContain('env: SVC_API_KEY');
  });

  it('replay --help gives delivery ids in the forms listen prints (whd_… or its 8-character tail)', async () => {
    const { out } = await parse(['replay', '--help']);
    const idExamples = out.split('\n').filter((line) => /\$ svc-cli replay (?!-)/.test(line));
    expect(idExamples.length).toBeGreaterThan(0);
    for (const line of idExamples) {
      const ids = line.replace(/^.*\$ svc-cli replay /, '').replace(/\s*\(.*$/, '').split(/\s+/).filter((word) => word && !word.startsWith('-') && !word.includes('://'));
      for (const id of ids) expect(id).toMatch(/^(whd_[0-9a-f…]+|[0-9a-f]{8})$/);
    }
  });

  it('--version prints the package version', async () => {
    const { error, out } = await parse(['--version']);
    expect(error.code).toBe('commander.version');
    expect(out).toMatch(/^\d+\.\d+\.\d+\n$/);
  });
});

describe('option errors are one line prefixed svc-cli:', () => {
  it.each([
    [['listen', '--port', '65536'], 'commander.invalidArgument', "svc-cli: option '-p, --port <port>' argument '65536' is invalid. Must be an integer from 0 to 65535 (0 picks a free port).\n"],
    [['--base-url', 'x', 'deliveries', 'list'], 'commander.invalidArgument', "svc-cli: option '--base-url <url>' argument 'x' is invalid. Must be an absolute http:// or https:// URL.\n"],
    [['deliveries', 'list', '--limit', 'ten'], 'commander.invalidArgument', "svc-cli: option '-l, --limit <n>' argument 'ten' is invalid. Must be a positive integer.\n"],
    [['chat'], 'commander.missingArgument', "svc-cli: missing required argument 'prompt'\n"],
    [['deliveries', 'show'], 'commander.missingArgument', "svc-cli: missing required argument 'id'\n"],
    [['lisen'], 'commander.unknownCommand', "svc-cli: unknown command 'lisen' (did you mean listen?)\n"],
    // Stripe CLI's names, which a user coming from `stripe listen` types first.
    [['trigger'], 'commander.unknownCommand', "svc-cli: unknown command 'trigger' (stripe trigger's counterpart: svc-cli webhooks test [--sample ok|failed|ungrounded|streamed], or svc-cli listen --trigger)\n"],
    [['events', 'resend', 'whd_1'], 'commander.unknownCommand', "svc-cli: unknown command 'events' (stripe events resend's counterpart: svc-cli deliveries redeliver ID)\n"],
    [['listen', '--bogus'], 'commander.unknownOption', "svc-cli: unknown option '--bogus'\n"],
  ])('%j', async (args, code, message) => {
    const { error, err } = await parse(args);
    expect(error.code).toBe(code);
    expect(error.exitCode).toBe(1);
    expect(err).toBe(message);
  });
});

// Commander's message repeats an invalid value ("argument 'whsec_…' is invalid"): a secret would be printed on the
// terminal, or in a CI log. The secret's errors say what is wrong without it.
describe('a --secret that cannot be right is refused without being shown', () => {
  it.each([
    [['listen', '--secret', ''], 'Must be the signing secret (whsec_…), not empty: is the variable it comes from set?'],
    [['replay', '--last', '1', '--secret', 'whsec_abc123\r\n'], 'Must be the signing secret without whitespace at its start or end (a pasted line break?).'],
    [['replay', '--last', '1', '--secret', 'whsec_new123', '--secret', 'whsec_old123'], 'Given more than once: this command signs with one secret (listen takes several).'],
  ])('%j', async (args, problem) => {
    const { io, out, err } = capture();
    const error = (await makeProgram(io, { exitOverride: true })
      .parseAsync(['node', 'svc-cli', ...args])
      .then(() => undefined, (e: unknown) => e)) as CliError;
    expect(error.message).toBe(`option '--secret' is invalid (its value is not shown). ${problem}`);
    expect(error.exitCode).toBe(2);
    for (const text of [error.message, out.join(''), err.join('')]) expect(text).not.toMatch(/whsec_\w+/);
  });
});

describe('deliveries redeliver: one id, or filters', () => {
  async function run(args: string[]): Promise<unknown> {
    const { io } = capture();
    return makeProgram(io, { exitOverride: true })
      .parseAsync(['node', 'svc-cli', '--api-key', 'sk-svc-test', '--base-url', 'http://127.0.0.1:9', ...args])
      .then(() => undefined, (e: unknown) => e);
  }

  it('refuses an id together with filters, and neither: usage errors, exit 2', async () => {
    const both = (await run(['deliveries', 'redeliver', '4b5c6d7e', '--status', 'failed'])) as CliError;
    expect(String(both)).toContain('give a delivery id or filters (--status/--request-id/--since/--until/--last-status-code), not both');
    const neither = (await run(['deliveries', 'redeliver'])) as CliError;
    expect(String(neither)).toContain('give a delivery id, or filters (--status/--request-id/--since/--until/--last-status-code)');
    // Were 1, a failed redelivery's code: a script could not tell a wrong call from a server that refused.
    expect([both.exitCode, neither.exitCode]).toEqual([2, 2]);
  });

  it('refuses a --since it cannot read, before calling the server', async () => {
    const error = (await run(['deliveries', 'redeliver', '--since', 'yesterday'])) as CommanderError;
    expect(error).toBeInstanceOf(CommanderError);
    expect(error.message).toMatch(/--since <time>' argument 'yesterday' is invalid/);
  });
});
