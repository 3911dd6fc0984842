import { describe, expect, it } from 'vitest';
import { DELIVERY_LIST_LIMITS, deliveryListSearch, parseDeliveryListQuery, statusCodeRange } from './delivery-list-query.js';
import { DeliveryListQuerySchema } from './webhooks.js';

const ID = 'whd_0123456789abcdef0123456789abcdef';

describe('parseDeliveryListQuery', () => {
  it('reads limit, status and before, with the default page size', () => {
    expect(parseDeliveryListQuery({})).toEqual({ ok: true, query: { limit: DELIVERY_LIST_LIMITS.default, status: undefined, before: undefined } });
    expect(parseDeliveryListQuery({ limit: '100', status: 'failed', before: ID })).toEqual({
      ok: true,
      query: { limit: 100, status: 'failed', before: ID },
    });
  });

  it.each([
    [{ limit: '0' }, 'limit', "'limit' must be an integer from 1 to 100; got '0'."],
    [{ limit: '101' }, 'limit', "'limit' must be an integer from 1 to 100; got '101'."],
    [{ limit: '2.0' }, 'limit', "'limit' must be an integer from 1 to 100; got '2.0'."],
    [{ limit: '' }, 'limit', "'limit' must be an integer from 1 to 100; got ''."],
    [{ limit: ['1', '2'] }, 'limit', "'limit' must be given once."],
    [{ status: 'sent' }, 'status', "'status' must be one of pending, delivered, failed, cancelled; got 'sent'."],
    [{ status: '' }, 'status', "'status' must be one of pending, delivered, failed, cancelled; got ''."],
    [{ before: 'nope' }, 'before', "'before' must be a delivery id (whd_…) from a previous page; got 'nope'."],
    [{ before: ID.toUpperCase() }, 'before', `'before' must be a delivery id (whd_…) from a previous page; got '${ID.toUpperCase()}'.`],
    [{ before: { x: ID } }, 'before', "'before' must be given once."],
    // As Express's simple query parser reads `?status[]=failed` and `?limit[x]=5`.
    [{ 'status[]': 'failed' }, 'status', "'status' must be given as status=…, without brackets."],
    [{ 'limit[x]': '5' }, 'limit', "'limit' must be given as limit=…, without brackets."],
    [{ 'before[]': ID, limit: '5' }, 'before', "'before' must be given as before=…, without brackets."],
    // The first bad parameter is named, in the order limit, status, before.
    [{ limit: 'x', status: 'sent', before: 'nope' }, 'limit', "'limit' must be an integer from 1 to 100; got 'x'."],
  ])('refuses %j, naming %s', (params, param, message) => {
    expect(parseDeliveryListQuery(params)).toEqual({ ok: false, issue: { param, message } });
  });

  it('quotes a long bad value cut to 128 characters, as the server cuts ids in its messages', () => {
    expect(parseDeliveryListQuery({ before: 'x'.repeat(15_000) })).toEqual({
      ok: false,
      issue: { param: 'before', message: `'before' must be a delivery id (whd_…) from a previous page; got '${'x'.repeat(128)}…'.` },
    });
    expect(parseDeliveryListQuery({ status: 's'.repeat(200) })).toEqual({
      ok: false,
      issue: { param: 'status', message: `'status' must be one of pending, delivered, failed, cancelled; got '${'s'.repeat(128)}…'.` },
    });
  });

  it('reads the search: request_id, since, until and last_status_code (a status or a class, lower-cased)', () => {
    expect(
      parseDeliveryListQuery({ request_id: 'chatcmpl-abc', since: '2026-11-25T09:00:00Z', until: '2026-11-25T10:00:00.500+01:00', last_status_code: '5XX' }),
    ).toEqual({
      ok: true,
      query: { limit: 20, request_id: 'chatcmpl-abc', since: '2026-11-25T09:00:00Z', until: '2026-11-25T10:00:00.500+01:00', last_status_code: '5xx' },
    });
    expect(statusCodeRange('5xx')).toEqual({ min: 500, max: 599 });
    expect(statusCodeRange('404')).toEqual({ min: 404, max: 404 });
    expect(() => statusCodeRange('6xx')).toThrow(TypeError);
  });

  it.each([
    [{ request_id: '' }, 'request_id', "'request_id' must be a request id (chatcmpl-…, test-…) of 1 to 200 characters."],
    [{ request_id: 'x'.repeat(201) }, 'request_id', "'request_id' must be a request id (chatcmpl-…, test-…) of 1 to 200 characters."],
    [{ since: 'yesterday' }, 'since', "'since' must be an ISO 8601 time with its offset, e.g. 2026-11-25T09:00:00Z; got 'yesterday'."],
    // Date.parse reads it as 2 March; the bulk redelivery's body refuses it.
    [{ until: '2026-02-30T00:00:00Z' }, 'until', "'until' must be an ISO 8601 time with its offset, e.g. 2026-11-25T09:00:00Z; got '2026-02-30T00:00:00Z'."],
    [{ since: '2026-04-31T23:00:00-05:00' }, 'since', "'since' must be an ISO 8601 time with its offset, e.g. 2026-11-25T09:00:00Z; got '2026-04-31T23:00:00-05:00'."],
    [{ until: '2026-11-25T09:00:00' }, 'until', "'until' must be an ISO 8601 time with its offset, e.g. 2026-11-25T09:00:00Z; got '2026-11-25T09:00:00'."],
    [{ until: '2026-13-45T09:00:00Z' }, 'until', "'until' must be an ISO 8601 time with its offset, e.g. 2026-11-25T09:00:00Z; got '2026-13-45T09:00:00Z'."],
    [{ since: ['2026-11-25T09:00:00Z', '2026-11-26T09:00:00Z'] }, 'since', "'since' must be given once."],
    [{ last_status_code: '600' }, 'last_status_code', "'last_status_code' must be an HTTP status (503) or a class of them (5xx); got '600'."],
    [{ last_status_code: '5x' }, 'last_status_code', "'last_status_code' must be an HTTP status (503) or a class of them (5xx); got '5x'."],
  ])('refuses the search %j, naming %s', (params, param, message) => {
    expect(parseDeliveryListQuery(params)).toEqual({ ok: false, issue: { param, message } });
  });

  it('accepts what the documented schema accepts', () => {
    for (const query of [{ limit: 1 }, { limit: 100, status: 'pending' as const }, { before: ID }, { request_id: 'test-1', since: '2026-11-25T09:00:00Z', last_status_code: '5xx' }]) {
      expect(DeliveryListQuerySchema.safeParse(query).success).toBe(true);
      const params = Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)]));
      expect(parseDeliveryListQuery(params).ok).toBe(true);
    }
    for (const query of [{ limit: 0 }, { limit: 101 }, { before: 'whd_1' }, { last_status_code: '700' }, { since: '2026-11-25' }]) {
      expect(DeliveryListQuerySchema.safeParse(query).success).toBe(false);
      const params = Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)]));
      expect(parseDeliveryListQuery(params).ok).toBe(false);
    }
  });
});

describe('deliveryListSearch', () => {
  it('writes what is set, in a fixed order, and reads back the same', () => {
    expect(deliveryListSearch({})).toBe('');
    expect(deliveryListSearch({ before: ID, status: 'failed', limit: 20 })).toBe(`?limit=20&status=failed&before=${ID}`);
    expect(deliveryListSearch({ last_status_code: '5xx', request_id: 'chatcmpl-a', until: '2026-11-25T10:00:00.000Z', since: '2026-11-25T09:00:00.000Z' })).toBe(
      '?request_id=chatcmpl-a&since=2026-11-25T09%3A00%3A00.000Z&until=2026-11-25T10%3A00%3A00.000Z&last_status_code=5xx',
    );
    const search = deliveryListSearch({ limit: 5, status: 'cancelled', before: ID });
    expect(parseDeliveryListQuery(Object.fromEntries(new URLSearchParams(search)))).toEqual({
      ok: true,
      query: { limit: 5, status: 'cancelled', before: ID },
    });
  });
});
