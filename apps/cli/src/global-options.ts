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

/** A client for the server's API; fails with one line when no key is configured. */
export function apiClientFor(command: Command): ApiClient {
  const { baseUrl, apiKey } = globalOptions(command);
  if (!apiKey || apiKey.trim() === '') {
    throw new CliError('no API key: pass --api-key or set SVC_API_KEY');
  }
  return createApiClient({ baseUrl, apiKey: apiKey.trim() });
}
