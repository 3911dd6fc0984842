import { Command, Option } from 'commander';
import { WEBHOOK_TEST_SAMPLES } from '@svc/protocol/delivery-list-query';
import type { WebhookTestResult, WebhookTestSample } from '@svc/protocol';
import { CliError } from '../errors.js';
import { apiClientFor, globalOptions } from '../global-options.js';
import { mark, processIo, type Io } from '../output.js';

/** `svc-cli webhooks test`: asks the server to send a test delivery to the key's webhook URL. */
export function makeWebhooksCommand(io: Io = processIo): Command {
  const webhooks = new Command('webhooks').description("the API key's audit webhook");
  webhooks.addHelpText(
    'after',
    `
Examples:
  $ svc-cli webhooks test
  $ svc-cli webhooks test --sample ungrounded
  $ SVC_API_KEY=sk-svc-... svc-cli webhooks test --json`,
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
Exits 0 when the receiver answered 2xx, 1 when it did not (or no webhook URL is configured). Each sample
has the shape of a real payload of that kind, with test: true and request_id "test-<delivery id>".

Examples:
  $ svc-cli listen --port 4000 &      # then set the key's webhook URL to http://127.0.0.1:4000/
  $ svc-cli webhooks test
  $ svc-cli webhooks test --sample failed
  $ svc-cli webhooks test --json`,
    )
    .action(async (opts: { sample: WebhookTestSample }, command: Command) => {
      const { json } = globalOptions(command);
      const { data, raw } = await apiClientFor(command).json<WebhookTestResult>('POST', '/v1/webhooks/test', { sample: opts.sample });
      if (json) io.out(`${raw.trim()}\n`);
      if (!data.success) {
        const reason = typeof data.status_code === 'number' ? `the receiver answered ${data.status_code}` : (data.error ?? 'no answer');
        throw new CliError(`test delivery to ${data.delivered_to} failed: ${reason}`);
      }
      if (!json) io.out(`${mark.ok()} Test delivery${opts.sample === 'ok' ? '' : ` (${opts.sample})`} to ${data.delivered_to} succeeded\n`);
    });
  return webhooks;
}
