import { describe, expect, it } from 'vitest';
import { runCli, useSandbox } from './cli-process.js';
import { useLocalServers } from './local-servers.js';

// `--json` is for scripts: a failure must be JSON on stdout too, not an empty stdout and a line on stderr only.
const sandbox = useSandbox();
const servers = useLocalServers();

/** A server answering every request with `status` and the JSON `body`, as svc answers an error. */
const answering = (status: number, body: unknown) => servers.answering(status, 'application/json', JSON.stringify(body));

describe('svc-cli webhooks test --json when the API call fails', () => {
  it.each([
    [401, { error: { message: 'Incorrect API key provided: sk-x.', type: 'authentication_error', code: 'invalid_api_key', param: null } }],
    [400, { error: { message: 'No webhook URL is configured for this API key.', type: 'invalid_request_error', code: 'invalid_request' } }],
  ])('HTTP %i: prints the server\'s error object on stdout and exits 1', async (status, body) => {
    const base = await answering(status, body);
    const result = await runCli(['webhooks', 'test', '--json'], { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(JSON.parse(result.stdout)).toEqual(body);
    expect(result.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain(`svc-cli: ${body.error.message}`);
    expect(result.code).toBe(1);
  });

  it('no server at the base URL: an error object in the same shape saying so, exit 1', async () => {
    const base = await servers.unused();
    const result = await runCli(['webhooks', 'test', '--json'], { cwd: sandbox.path, env: { SVC_BASE_URL: base, SVC_API_KEY: 'sk-x' } });
    expect(JSON.parse(result.stdout)).toEqual({
      error: { message: `cannot reach the server at ${base}: connection refused`, type: 'cli_error', code: null, param: null },
    });
    expect(result.code).toBe(1);
  });

  it('no API key: the error object says where one comes from, exit 1', async () => {
    const result = await runCli(['webhooks', 'test', '--json'], { cwd: sandbox.path, env: { SVC_BASE_URL: 'http://127.0.0.1:9' } });
    const { error } = JSON.parse(result.stdout) as { error: { message: string; type: string } };
    expect(error.message).toMatch(/^no API key: pass --api-key or set SVC_API_KEY/);
    expect(error.type).toBe('cli_error');
    expect(result.code).toBe(1);
  });
});
