import type { Command } from 'commander';
import { CliError } from './errors.js';
import { createApiClient, type ApiClient } from './api-client.js';

/** Options every command accepts (design §7), declared once on the root command. */
export interface GlobalOptions {
  baseUrl: string;
  apiKey?: string;
  json: boolean;
  color: boolean;
}

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export function globalOptions(command: Command): GlobalOptions {
  const opts = command.optsWithGlobals<Partial<GlobalOptions>>();
  return {
    baseUrl: opts.baseUrl ?? DEFAULT_BASE_URL,
    apiKey: opts.apiKey,
    json: opts.json === true,
    color: opts.color !== false,
  };
}

const WHERE_KEYS_COME_FROM =
  'svc-server prints one on its first start; create more in the dashboard (Settings → API Keys) or with `svc-server keys create`';

/** A client for the server's API; fails with one line when no key is configured. */
export function apiClientFor(command: Command): ApiClient {
  const { baseUrl, apiKey } = globalOptions(command);
  if (!apiKey || apiKey.trim() === '') {
    // A first run has no key yet: say where one comes from, as `stripe` points to `stripe login`.
    throw new CliError(`no API key: pass --api-key or set SVC_API_KEY. ${WHERE_KEYS_COME_FROM}`);
  }
  return createApiClient({ baseUrl, apiKey: apiKey.trim() });
}
