import { describe, expect, it } from 'vitest';
import { attemptNote } from './attempt-note.js';

describe('attemptNote', () => {
  it.each([
    ['a 500 with a body: the body, not "HTTP 500" again', { status_code: 500, error: 'HTTP 500', response_body: 'boom' }, { kind: 'response', text: 'boom' }],
    ['a 500 without a body: nothing', { status_code: 500, error: 'HTTP 500', response_body: '' }, null],
    ['a redirect: why it failed', { status_code: 302, error: 'HTTP 302 (redirects are not followed)', response_body: 'Found' }, { kind: 'error', text: 'Redirects are not followed' }],
    ['a timeout after the status: the error', { status_code: 200, error: 'answered 200, then its body timed out after 500 ms', response_body: 'par' }, { kind: 'error', text: 'answered 200, then its body timed out after 500 ms' }],
    ['no answer: the error', { status_code: null, error: 'connect ECONNREFUSED 127.0.0.1:9', response_body: null }, { kind: 'error', text: 'connect ECONNREFUSED 127.0.0.1:9' }],
    ['a success: its answer', { status_code: 200, error: null, response_body: 'ok' }, { kind: 'response', text: 'ok' }],
  ] as const)('%s', (_name, attempt, note) => {
    expect(attemptNote(attempt)).toEqual(note);
  });
});
