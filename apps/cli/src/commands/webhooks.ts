import { Command } from 'commander';
import type { WebhookTestResult } from '@svc/protocol';
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
  $ SVC_API_KEY=sk-svc-... svc-cli webhooks test --json`,
  );

  webhooks
    .command('test')
    .description("send a test delivery to the API key's webhook URL and show the receiver's answer")
    .addHelpText(
      'after',
      `
Exits 0 when the receiver answered 2xx, 1 when it did not (or no webhook URL is configured).

Examples:
  $ svc-cli listen --port 4000 &      # then set the key's webhook URL to http://127.0.0.1:4000/
  $ svc-cli webhooks test
  $ svc-cli webhooks test --json`,
    )
    .action(async (_opts: unknown, command: Command) => {
      const { json } = globalOptions(command);
      const { data, raw } = await apiClientFor(command).json<WebhookTestResult>('POST', '/v1/webhooks/test');
      if (json) io.out(`${raw.trim()}\n`);
      if (!data.success) {
        const reason = typeof data.status_code === 'number' ? `the receiver answered ${data.status_code}` : (data.error ?? 'no answer');
        throw new CliError(`test delivery to ${data.delivered_to} failed: ${reason}`);
      }
      if (!json) io.out(`${mark.ok()} Test delivery to ${data.delivered_to} succeeded\n`);
    });
  return webhooks;
}
