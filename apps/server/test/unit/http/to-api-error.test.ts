import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../src/http/errors.js';
import { toApiError } from '../../../src/http/to-api-error.js';

/** What body-parser / raw-body and http-errors throw (`type`, `status`, `limit` as they set them). */
const thrown = (fields: Record<string, unknown>) => Object.assign(new Error('from a library'), fields);

const CASES: Array<{ what: string; err: unknown; status: number; code: string; message?: string }> = [
  { what: 'unparsable JSON', err: thrown({ type: 'entity.parse.failed', status: 400 }), status: 400, code: 'invalid_json' },
  {
    what: "a body over the dashboard parser's 100kb",
    err: thrown({ type: 'entity.too.large', status: 413, limit: 102_400 }),
    status: 413,
    code: 'request_too_large',
    message: 'The request body is larger than the 100 KiB limit.',
  },
  {
    what: 'a body over 10 MiB',
    err: thrown({ type: 'entity.too.large', status: 413, limit: 10 * 1024 * 1024 }),
    status: 413,
    code: 'request_too_large',
    message: 'The request body is larger than the 10 MiB limit.',
  },
  { what: 'a charset other than UTF-8', err: thrown({ type: 'charset.unsupported', status: 415 }), status: 400, code: 'invalid_request' },
  { what: 'a body cut short', err: thrown({ type: 'request.aborted', status: 400 }), status: 400, code: 'invalid_request' },
  { what: 'a missing file (send)', err: thrown({ status: 404 }), status: 404, code: 'not_found' },
  { what: 'malformed percent-encoding', err: new URIError('URI malformed'), status: 400, code: 'invalid_request' },
  { what: 'a bug', err: new TypeError('x is undefined'), status: 500, code: 'internal_error' },
  { what: 'a full disk (SQLite)', err: thrown({ code: 'SQLITE_FULL' }), status: 503, code: 'database_unavailable' },
  { what: 'a read-only file system (SQLite)', err: thrown({ code: 'SQLITE_READONLY_DBMOVED' }), status: 503, code: 'database_unavailable' },
  { what: "another session's lock past lock_timeout (Postgres)", err: thrown({ code: '55P03' }), status: 503, code: 'database_unavailable' },
  { what: 'max_connections reached (Postgres)', err: thrown({ code: '53300' }), status: 503, code: 'database_unavailable' },
  { what: 'a standby after a failover (Postgres)', err: thrown({ code: '25006' }), status: 503, code: 'database_unavailable' },
  { what: 'Postgres gone', err: thrown({ code: 'ECONNREFUSED' }), status: 503, code: 'database_unavailable' },
  { what: 'a constraint (Postgres): a bug, not a fault of the surroundings', err: thrown({ code: '23505' }), status: 500, code: 'internal_error' },
  { what: 'a constraint (SQLite)', err: thrown({ code: 'SQLITE_CONSTRAINT_UNIQUE' }), status: 500, code: 'internal_error' },
];

describe('toApiError', () => {
  for (const c of CASES) {
    it(`${c.what}: ${c.status} ${c.code}`, () => {
      const error = toApiError(c.err);
      expect(error.status).toBe(c.status);
      expect(error.code).toBe(c.code);
      if (c.message) expect(error.message).toBe(c.message);
      expect(error.message).not.toContain('from a library');
    });
  }

  it('keeps an ApiError as it is, and a bug as the 500\'s cause (for the log, never the body)', () => {
    const own = new ApiError('model_not_found', 'no such model', { param: 'model' });
    expect(toApiError(own)).toBe(own);
    const bug = new TypeError('x is undefined');
    const error = toApiError(bug);
    expect(error.cause).toBe(bug);
    expect(JSON.stringify(error.toBody())).not.toContain('undefined');
  });
});
