// No zod here: this module is also the `@svc/protocol/delivery-list-query` entry, which the CLI and the
// dashboard load at run time without the schemas.
import { quoted } from './quoted.js';

/** `cancelled`: stopped before delivery (by a cancel, or because the key's webhook URL was cleared); `last_error` says why. */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'cancelled'] as const;

/** Sample payloads `POST /v1/webhooks/test` can send (`svc-cli webhooks test --sample`); `ok` is the default. */
export const WEBHOOK_TEST_SAMPLES = ['ok', 'failed', 'ungrounded', 'streamed'] as const;

/** The most deliveries one bulk redelivery (`POST /v1/webhooks/deliveries/redeliver`) takes, newest first. */
export const REDELIVERY_MAX = 1000;

/**
 * From this long of failing on (every attempt since `failing_since`), the dashboard marks a key's endpoint
 * as failing. Svix disables such an endpoint after 5 days; svc only marks it and discards nothing.
 */
export const FAILING_ENDPOINT_MS = 24 * 60 * 60 * 1000;

/** A delivery id (`whd_` and 32 hex digits); a page's `next_cursor` and the `before` of the next. */
export const DELIVERY_ID_PATTERN = /^whd_[0-9a-f]{32}$/;

/** Page size of a deliveries list when `limit` is not given, and the largest one allowed. */
export const DELIVERY_LIST_LIMITS = { default: 20, max: 100 } as const;

/** A page request of a deliveries list, as both the API and the dashboard API read it. */
export interface DeliveryListQuery {
  limit: number;
  status?: (typeof DELIVERY_STATUSES)[number];
  /** A delivery id: only deliveries older than it. */
  before?: string;
  /** Only the delivery (or deliveries: a redelivered test) of this request (`chatcmpl-…`, `req_…`, `test-…`). */
  request_id?: string;
  /** Created at or after this ISO 8601 time. */
  since?: string;
  /** Created before this ISO 8601 time. */
  until?: string;
  /** The last attempt's HTTP status: one (`500`) or a class (`5xx`). */
  last_status_code?: string;
}

/** Why a list query was refused: the parameter and a message for the error body. */
export interface DeliveryListQueryIssue {
  param: 'limit' | 'status' | 'before' | 'request_id' | 'since' | 'until' | 'last_status_code';
  message: string;
}

/** An ISO 8601 time with its offset (`2026-11-25T09:00:00Z`, `…+01:00`), as `since` and `until` take it. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;
/**
 * Whether `text` is an ISO_TIME on a day the calendar has: Date.parse reads 2026-02-30 as 2 March, where the body of
 * a bulk redelivery (zod's datetime) refuses it, so a list and the redelivery of that list would differ.
 */
function isIsoTime(text: string): boolean {
  if (!ISO_TIME.test(text) || Number.isNaN(Date.parse(text))) return false;
  const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** `last_status_code`: a status (`503`) or a class of them (`5xx`). */
const STATUS_CODE_FILTER = /^([1-5])(\d\d|xx)$/i;
/** The longest `request_id` a list takes (svc's own are ~40 characters). */
const REQUEST_ID_MAX = 200;

/**
 * The range of HTTP statuses a `last_status_code` filter means, both ends included.
 *
 * @example
 * statusCodeRange('5xx'); // { min: 500, max: 599 }
 * statusCodeRange('404'); // { min: 404, max: 404 }
 */
export function statusCodeRange(filter: string): { min: number; max: number } {
  const match = STATUS_CODE_FILTER.exec(filter);
  if (!match) throw new TypeError(`not a status code filter: ${filter}`);
  if (match[2]!.toLowerCase() === 'xx') return { min: Number(match[1]) * 100, max: Number(match[1]) * 100 + 99 };
  return { min: Number(filter), max: Number(filter) };
}

export type DeliveryListQueryResult = { ok: true; query: DeliveryListQuery } | { ok: false; issue: DeliveryListQueryIssue };

const fail = (param: DeliveryListQueryIssue['param'], message: string): DeliveryListQueryResult => ({ ok: false, issue: { param, message } });

/**
 * A query parameter's one value (undefined when absent), or why it cannot be read: given twice (an array), or with
 * brackets (`status[]=failed`, which a parser that does not nest, Express's simple one, keeps under a name of its
 * own, so it would pass for no `status` and list every status).
 *
 * @example
 * singleQueryParam({ status: ['a', 'b'] }, 'status'); // { ok: false, message: "'status' must be given once." }
 */
export function singleQueryParam(params: Readonly<Record<string, unknown>>, name: string): { ok: true; text: string | undefined } | { ok: false; message: string } {
  const value = params[name];
  if (value !== undefined && typeof value !== 'string') return { ok: false, message: `'${name}' must be given once.` };
  if (Object.keys(params).some((key) => key.startsWith(`${name}[`))) return { ok: false, message: `'${name}' must be given as ${name}=…, without brackets.` };
  return { ok: true, text: value };
}

/**
 * Reads `limit`, `status`, `before`, `request_id`, `since`, `until` and `last_status_code` from a parsed query
 * string (each at most once). A bad value is an
 * outcome, not an exception: the server turns it into its 400 `invalid_value` error.
 *
 * @example
 * parseDeliveryListQuery({ limit: '2', status: 'failed' }); // { ok: true, query: { limit: 2, status: 'failed', before: undefined } }
 * parseDeliveryListQuery({ before: 'nope' }).ok;              // false, issue.param === 'before'
 */
export function parseDeliveryListQuery(params: Readonly<Record<string, unknown>>): DeliveryListQueryResult {
  const { max } = DELIVERY_LIST_LIMITS;
  const limitParam = singleQueryParam(params, 'limit');
  if (!limitParam.ok) return fail('limit', limitParam.message);
  const limitText = limitParam.text;
  if (limitText !== undefined && (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > max)) {
    return fail('limit', `'limit' must be an integer from 1 to ${max}; got '${quoted(limitText)}'.`);
  }
  const statusParam = singleQueryParam(params, 'status');
  if (!statusParam.ok) return fail('status', statusParam.message);
  const status = statusParam.text;
  if (status !== undefined && !isDeliveryStatus(status)) {
    return fail('status', `'status' must be one of ${DELIVERY_STATUSES.join(', ')}; got '${quoted(status)}'.`);
  }
  const beforeParam = singleQueryParam(params, 'before');
  if (!beforeParam.ok) return fail('before', beforeParam.message);
  const before = beforeParam.text;
  if (before !== undefined && !DELIVERY_ID_PATTERN.test(before)) {
    return fail('before', `'before' must be a delivery id (whd_…) from a previous page; got '${quoted(before)}'.`);
  }
  const requestParam = singleQueryParam(params, 'request_id');
  if (!requestParam.ok) return fail('request_id', requestParam.message);
  const requestId = requestParam.text;
  if (requestId !== undefined && (requestId === '' || requestId.length > REQUEST_ID_MAX)) {
    return fail('request_id', `'request_id' must be a request id (chatcmpl-…, test-…) of 1 to ${REQUEST_ID_MAX} characters.`);
  }
  const times: Partial<Record<'since' | 'until', string>> = {};
  for (const name of ['since', 'until'] as const) {
    const param = singleQueryParam(params, name);
    if (!param.ok) return fail(name, param.message);
    if (param.text !== undefined && !isIsoTime(param.text)) {
      return fail(name, `'${name}' must be an ISO 8601 time with its offset, e.g. 2026-11-25T09:00:00Z; got '${quoted(param.text)}'.`);
    }
    if (param.text !== undefined) times[name] = param.text;
  }
  const codeParam = singleQueryParam(params, 'last_status_code');
  if (!codeParam.ok) return fail('last_status_code', codeParam.message);
  const code = codeParam.text;
  if (code !== undefined && !STATUS_CODE_FILTER.test(code)) {
    return fail('last_status_code', `'last_status_code' must be an HTTP status (503) or a class of them (5xx); got '${quoted(code)}'.`);
  }
  return {
    ok: true,
    query: {
      limit: limitText === undefined ? DELIVERY_LIST_LIMITS.default : Number(limitText),
      status,
      before,
      ...(requestId !== undefined ? { request_id: requestId } : {}),
      ...times,
      ...(code !== undefined ? { last_status_code: code.toLowerCase() } : {}),
    },
  };
}

/**
 * The query string of a list request (with its `?`; empty when nothing is set): what the CLI and the
 * dashboard send and `parseDeliveryListQuery` reads.
 *
 * @example
 * deliveryListSearch({ limit: 20, status: 'failed' }); // '?limit=20&status=failed'
 */
export function deliveryListSearch(query: Partial<DeliveryListQuery>): string {
  const search = new URLSearchParams();
  if (query.limit !== undefined) search.set('limit', String(query.limit));
  if (query.status) search.set('status', query.status);
  if (query.before) search.set('before', query.before);
  if (query.request_id) search.set('request_id', query.request_id);
  if (query.since) search.set('since', query.since);
  if (query.until) search.set('until', query.until);
  if (query.last_status_code) search.set('last_status_code', query.last_status_code);
  return search.size > 0 ? `?${search}` : '';
}

/** True when `value` names a delivery state. */
export function isDeliveryStatus(value: string): value is (typeof DELIVERY_STATUSES)[number] {
  return (DELIVERY_STATUSES as readonly string[]).includes(value);
}
