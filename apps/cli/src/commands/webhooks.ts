import { Command, Option } from 'commander';
import { WEBHOOK_TEST_SAMPLES } from '@svc/protocol/delivery-list-query';
import type { WebhookTestSample } from '@svc/protocol';
import { CliError } from '../errors.js';
import { webhookTestResult } from '../response-shapes.js';
import { apiClientFor, globalOptions } from '../global-options.js';
import { mark, printable, processIo, kleur, type Io } from '../output.js';
import { CHECK_CASES, DUPLICATE_HEADER, capitalise, checkReceiver, type CaseResult, type CheckCaseId } from '../check-receiver.js';
import { parseForwardUrl, parseOneSecret, parseTimeout } from '../options.js';
import { answerReason } from '../send-delivery.js';

/** `svc-cli webhooks test`: asks the server to send a test delivery to the key's webhook URL. */
export function makeWebhooksCommand(io: Io = processIo): Command {
  const webhooks = new Command('webhooks').description("the API key's audit webhook");
  webhooks.addHelpText(
    'after',
    `
Examples:
  $ svc-cli webhooks test
  $ svc-cli webhooks test --sample ungrounded
  $ SVC_API_KEY=sk-svc-... svc-cli webhooks test --json
  $ svc-cli webhooks check-receiver http://localhost:3000/webhooks/svc --secret whsec_...`,
  );

  webhooks
    .command('test')
    .description("send a test delivery to the API key's webhook URL and show the receiver's answer")
    .addOption(
      new Option('--sample <kind>', 'payload to send: ok (a grounded 200), failed (a 502), ungrounded (flagged spans), streamed')
        .choices(WEBHOOK_TEST_SAMPLES)
        .default('ok'),
    )
    .addHelpText(
      'after',
      `
Exits 0 when the receiver answered 2xx, 1 when it did not (or no webhook URL is configured); a refusal is
printed with the start of the receiver's answer (its first 2 KB), which says why. Each sample
has the shape of a real payload of that kind, with test: true and request_id "test-<delivery id>".

Examples:
  $ svc-cli listen --port 4000 &      # then set the key's webhook URL to http://127.0.0.1:4000/
  $ svc-cli webhooks test
  $ svc-cli webhooks test --sample failed
  $ svc-cli webhooks test --json`,
    )
    .action(async (opts: { sample: WebhookTestSample }, command: Command) => {
      const { json } = globalOptions(command);
      const { data, raw } = await apiClientFor(command).json('POST', '/v1/webhooks/test', webhookTestResult, { sample: opts.sample });
      if (json) io.out(`${raw.trim()}\n`);
      if (!data.success) {
        const status = data.status_code;
        // A redirect's error says where it points (the URL to set instead): "HTTP 308 (redirects are not followed: …)".
        const redirect = typeof status === 'number' && status >= 300 && status < 400 && data.error?.startsWith(`HTTP ${status} (`);
        const reason =
          typeof status === 'number' ? `the receiver answered ${redirect ? data.error!.slice('HTTP '.length) : status}` : noAnswer(data.delivered_to, data.error);
        // Why it refused is in its answer (a receiver's own text: escaped, it cannot drive the terminal).
        // An HTML error page (Express's default handler) is 2 KB of markup: its first line says it.
        const body = data.response_body?.trim();
        const answer = body?.startsWith('<') ? (answerReason(body) ?? 'an HTML page') : body;
        throw new CliError(`test delivery to ${data.delivered_to} failed: ${reason}${answer ? `: ${printable(answer)}` : ''}`);
      }
      if (!json) io.out(`${mark.ok()} Test delivery${opts.sample === 'ok' ? '' : ` (${opts.sample})`} to ${data.delivered_to} succeeded\n`);
    });
  webhooks.addCommand(makeCheckReceiverCommand(io));
  return webhooks;
}

/**
 * Why a test delivery got no answer, as svc recorded it (`connect ECONNREFUSED 127.0.0.1:4000`, undici's words), and
 * for a refused connection what to do: nothing listens at the webhook URL, the usual state of a receiver being set up.
 */
function noAnswer(url: string, error: string | null | undefined): string {
  if (!error) return 'no answer';
  if (!/\bECONNREFUSED\b/.test(error)) return error;
  let listen = 'svc-cli listen';
  try {
    const { hostname, port, pathname, protocol } = new URL(url);
    // listen receives on loopback over plain HTTP: suggested only where it could take this URL's deliveries.
    if (protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(hostname)) {
      listen = `svc-cli listen --port ${port || 80}${pathname === '/' ? '' : ` --path ${pathname}`}`;
    }
  } catch {
    // svc sent to it, so it parses; a plain `svc-cli listen` otherwise.
  }
  return `nothing accepts connections there (${error}): start your receiver, or run \`${listen}\` to see the deliveries arrive`;
}

const usage = (message: string): CliError => new CliError(message, { exitCode: 2 });

/** A command that takes its operands itself (the inherited settings refuse undeclared arguments). */
class OperandCommand extends Command {
  override copyInheritedSettings(sourceCommand: Command): this {
    super.copyInheritedSettings(sourceCommand);
    return this.allowExcessArguments();
  }
}

/** `svc-cli webhooks check-receiver URL --secret S`: sends signed fixtures and checks each answer. */
function makeCheckReceiverCommand(io: Io): Command {
  return new OperandCommand('check-receiver')
    .description('check that your receiver accepts and refuses signed fixtures as it must')
    // URL is read from the operands rather than declared with .argument(): a declared one widens the term column of
    // `svc-cli webhooks --help` enough to wrap the global options' env names.
    .usage('URL --secret S [options]')
    // Checked as listen and replay check it: a pasted line break in it failed every signed case, blamed on the receiver.
    .addOption(new Option('--secret <secret>', "the receiver's current signing secret").env('SVC_WEBHOOK_SECRET').argParser(parseOneSecret))
    // svc itself waits SVC_WEBHOOK_TIMEOUT_MS (10 s by default) for an answer: a shorter default failed receivers svc
    // accepts, a 12 MiB case first among them on a busy machine.
    .option('--timeout <duration>', 'per request, e.g. 10s or 500ms; no answer in time fails that case (svc waits SVC_WEBHOOK_TIMEOUT_MS, 10 s by default)', '10s')
    .option('--skip <cases>', `cases not to run, comma-separated (${CHECK_CASES.join(', ')})`, (value: string, previous: string[] = []) => [...previous, ...value.split(',')])
    .addHelpText(
      'after',
      `
URL: the receiver, e.g. http://localhost:3000/webhooks/svc (http:// is assumed).

Cases (a correct receiver passes all):
  valid              a delivery signed with the secret                          → 2xx
  exact-bytes        a signed delivery whose JSON a parser would not reproduce   → 2xx (verify the raw bytes)
  large-body         a signed 12 MiB delivery (a long prompt)                    → 2xx (body limit ≥ 64 MiB)
  tampered-body      body changed after signing                                 → 4xx
  wrong-signature    well-formed signatures that match nothing                  → 4xx
  missing-signature  no X-Svc-Signature, no webhook-signature                   → 4xx
  stale-timestamp    correctly signed, webhook-timestamp 10 minutes old         → 4xx
  unknown-secret     signed only with another secret                            → 4xx
  duplicate          the same delivery id twice                                 → 2xx, then 2xx + ${capitalise(DUPLICATE_HEADER)}: true
  rotation           webhook-signature "v1,<new> v1,<old>" (--secret is the new) → 2xx

Duplicates: answer a delivery id you already processed (webhook-id = X-Svc-Delivery) with 2xx and the header
"${capitalise(DUPLICATE_HEADER)}: true". A receiver that de-duplicates silently can pass --skip duplicate.
Receivers that verify only X-Svc-Signature (GitHub style, no timestamp) fail stale-timestamp by design:
verify the Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) instead.

Exit 0 when every case passed, 1 when one failed, 2 on a usage error.

Examples:
  $ svc-cli webhooks check-receiver localhost:3000/webhooks/svc --secret whsec_...
  $ svc-cli webhooks check-receiver https://hooks.example.com/svc --secret "$SECRET" --skip duplicate
  $ svc-cli webhooks check-receiver http://127.0.0.1:3000/hooks --secret "$SECRET" --json --timeout 2s`,
    )
    .action(async (opts: { secret?: string; timeout: string; skip?: string[] }, command: Command) => {
      const { json } = globalOptions(command);
      const [url, ...extra] = command.args;
      if (extra.length > 0) throw usage(`check-receiver takes one URL, got ${command.args.length}: ${command.args.join(' ')}`);
      if (!url) throw usage('check-receiver needs the receiver URL: svc-cli webhooks check-receiver URL --secret S');
      let target: string;
      try {
        target = parseForwardUrl(url);
      } catch {
        throw usage(`invalid URL "${url}": must be an http:// or https:// URL`);
      }
      if (!opts.secret) throw usage("check-receiver needs the receiver's signing secret: --secret S (or SVC_WEBHOOK_SECRET)");
      const timeoutMs = parseTimeout(opts.timeout);
      if (timeoutMs === undefined) throw usage(`invalid --timeout "${opts.timeout}": a duration such as 10s or 500ms`);
      const skip = new Set<CheckCaseId>();
      for (const name of (opts.skip ?? []).map((s) => s.trim()).filter(Boolean)) {
        if (!(CHECK_CASES as readonly string[]).includes(name)) throw usage(`unknown case "${name}" for --skip: one of ${CHECK_CASES.join(', ')}`);
        skip.add(name as CheckCaseId);
      }

      if (!json) io.err(`Checking ${target} with ${CHECK_CASES.length - skip.size} cases (timeout ${timeoutMs} ms) …\n`);
      const report = await checkReceiver({ url: target, secret: opts.secret, timeoutMs, skip, onCase: json ? undefined : (r) => io.out(caseLine(r)) });
      if (json) io.out(`${JSON.stringify(report, null, 2)}\n`);
      if (report.unreachable) {
        throw new CliError(`cannot reach ${target}: ${report.unreachable}. Is the receiver running, and listening on that host and port? (no other case was sent)`);
      }
      if (report.wrong_url) throw new CliError(`${target} is not where the receiver takes deliveries: it ${report.wrong_url} (no other case was sent)`);
      if (!json) {
        const parts = [kleur.green(`${report.passed} passed`), report.failed ? kleur.red(`${report.failed} failed`) : '0 failed'];
        if (report.skipped) parts.push(kleur.yellow(`${report.skipped} skipped`));
        io.out(`\n${report.ok ? mark.ok() : mark.bad()} ${parts.join(', ')}: ${target} ${report.ok ? 'answers as a correct receiver must' : 'is not a correct receiver yet'}\n`);
      }
      if (!report.ok) throw new CliError(`${report.failed} of ${report.cases.length} cases failed`);
    });
}

const ID_WIDTH = Math.max(...CHECK_CASES.map((id) => id.length));

/** One case: mark, id, what was expected and what came back; for a failure, why on the next line. */
function caseLine(result: CaseResult): string {
  const id = result.id.padEnd(ID_WIDTH);
  if (result.outcome === 'skipped') {
    const note = result.id === 'duplicate' ? ' (the receiver de-duplicates silently: not checked)' : '';
    return `${kleur.yellow('-')} ${id}  skipped by --skip${note}: ${result.sent}\n`;
  }
  const answer = result.answer!;
  const cameBack =
    answer.status === null
      ? (answer.error ?? 'no answer')
      : `${answer.status}${answer.duplicate ? ` ${capitalise(DUPLICATE_HEADER)}: true` : ''}${answer.body ? ` ${preview(answer.body)}` : ''}`;
  const line = `${result.outcome === 'passed' ? mark.ok() : mark.bad()} ${id}  ${result.sent}: expected ${result.expected}, got ${cameBack}\n`;
  return result.reason ? `${line}${' '.repeat(ID_WIDTH + 4)}${kleur.red('→')} ${result.reason}\n` : line;
}

/** The first bytes of an answer's body on one line. */
function preview(body: string): string {
  const flat = body.replace(/\s+/g, ' ').trim();
  return kleur.dim(flat.length > 60 ? `${flat.slice(0, 59)}…` : flat);
}
