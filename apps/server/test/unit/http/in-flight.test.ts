import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../src/http/errors.js';
import { InFlightLimit } from '../../../src/http/in-flight.js';

const response = () => new ServerResponse(new IncomingMessage(new Socket()));

describe('InFlightLimit', () => {
  it('admits up to max, refuses the next with a 429 carrying retry-after, and frees a slot when a response closes', () => {
    let refused = 0;
    const limit = new InFlightLimit(2, { onReject: () => (refused += 1) });
    const [a, b, c] = [response(), response(), response()];
    limit.admit(a);
    limit.admit(b);
    limit.streaming(b);
    expect({ requests: limit.requests, streams: limit.streams }).toEqual({ requests: 2, streams: 1 });

    let error: unknown;
    try {
      limit.admit(c);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ApiError);
    const apiError = error as ApiError;
    expect(apiError.status).toBe(429);
    expect(apiError.toBody().error).toMatchObject({ type: 'rate_limit_error', code: 'too_many_requests_in_flight', param: null });
    expect(apiError.headers).toEqual({ 'retry-after': '1', 'retry-after-ms': '1000' });
    expect({ requests: limit.requests, rejections: limit.rejections, refused }).toEqual({ requests: 2, rejections: 1, refused: 1 });

    b.emit('close');
    expect({ requests: limit.requests, streams: limit.streams }).toEqual({ requests: 1, streams: 0 });
    limit.admit(c);
    expect(limit.requests).toBe(2);
  });

  it('keeps the slot of a response whose work goes on after it closes (a background response) until released, once', () => {
    const limit = new InFlightLimit(1);
    const a = response();
    limit.admit(a);
    const release = limit.keep(a);
    a.emit('close');
    expect(limit.requests).toBe(1);
    expect(() => limit.admit(response())).toThrow(ApiError);
    release();
    release();
    expect(limit.requests).toBe(0);
    limit.admit(response());
    expect(limit.requests).toBe(1);
  });

  it('takes no slot for a response that already closed (its close event is gone)', () => {
    const limit = new InFlightLimit(1);
    const gone = response();
    gone.destroy();
    limit.admit(gone);
    limit.streaming(gone);
    expect({ requests: limit.requests, streams: limit.streams }).toEqual({ requests: 0, streams: 0 });
    limit.admit(response());
    expect(limit.requests).toBe(1);
  });

  it('rejects a maximum that is not a positive integer', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => new InFlightLimit(bad)).toThrow(TypeError);
  });
});
