import { describe, expect, it } from 'vitest';
import { toApiError } from '../../../src/http/to-api-error.js';
import { storageFault } from '../../../src/storage/storage-fault.js';

/** An error as Node's net module or pg raise it: a message and a `code`. */
function failure(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('storageFault', () => {
  // Node's codes for a Postgres socket that failed. EPIPE is five capitals, as a SQLSTATE is: it was read as one,
  // found no SQLSTATE's meaning, and the request got a 500 internal_error and a stack trace in the log.
  it.each([
    ['ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'],
    ['ECONNRESET', 'read ECONNRESET'],
    ['EPIPE', 'write EPIPE'],
    ['ETIMEDOUT', 'connect ETIMEDOUT 10.0.0.5:5432'],
    ['EHOSTUNREACH', 'connect EHOSTUNREACH 10.0.0.5:5432'],
    ['ENOTFOUND', 'getaddrinfo ENOTFOUND db.internal'],
    ['EAI_AGAIN', 'getaddrinfo EAI_AGAIN db.internal'],
  ])('%s (Postgres out of reach) is a fault of the surroundings, answered 503', (code, message) => {
    const err = failure(code, message);
    expect(storageFault(err)).toContain('Postgres cannot be reached');
    const answer = toApiError(err);
    expect(answer.status).toBe(503);
    expect(answer.code).toBe('database_unavailable');
  });

  it.each([
    ['55P03', 'lock_timeout'],
    ['53300', 'connection limit'],
    ['57P01', 'shutting down'],
    ['08006', 'connection failed'],
  ])('Postgres SQLSTATE %s is a fault: %s', (code) => {
    expect(storageFault(failure(code, 'from Postgres'))).toMatch(new RegExp(`^Postgres ${code}`));
  });

  it('a constraint violation or a bug is no fault (500)', () => {
    expect(storageFault(failure('23505', 'duplicate key value violates unique constraint'))).toBeUndefined();
    expect(storageFault(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBeUndefined();
    expect(toApiError(failure('23505', 'duplicate key')).status).toBe(500);
  });
});
