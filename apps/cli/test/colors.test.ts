import { describe, expect, it } from 'vitest';
import { detectColors } from '../src/output.js';

const terminal = { isTTY: true };
const pipe = {};

describe('detectColors', () => {
  it.each([
    ['`listen --json | jq` in a terminal: stderr only', {}, pipe, terminal, { out: false, err: true }],
    ['`2> log`: stdout only', {}, terminal, pipe, { out: true, err: false }],
    ['both terminals', {}, terminal, terminal, { out: true, err: true }],
    ['NO_COLOR, even empty and with FORCE_COLOR', { NO_COLOR: '', FORCE_COLOR: '1' }, terminal, terminal, { out: false, err: false }],
    ['NODE_DISABLE_COLORS', { NODE_DISABLE_COLORS: '1' }, terminal, terminal, { out: false, err: false }],
    ['TERM=dumb', { TERM: 'dumb' }, terminal, terminal, { out: false, err: false }],
    ['FORCE_COLOR on pipes', { FORCE_COLOR: '1' }, pipe, pipe, { out: true, err: true }],
    ['FORCE_COLOR=0: as detected', { FORCE_COLOR: '0' }, pipe, terminal, { out: false, err: true }],
  ])('%s', (_name, env, stdout, stderr, expected) => {
    expect(detectColors(env, { stdout, stderr })).toEqual(expected);
  });
});
