import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { openFilesLimit, streamsThatFit, warnIfFilesShort } from '../../../src/http/open-files.js';

const LIMITS = (soft: string, hard: string) =>
  [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max processes             95864                95864                processes ',
    `Max open files            ${soft.padEnd(21)}${hard.padEnd(21)}files     `,
    'Max locked memory         8388608              8388608              bytes     ',
  ].join('\n');

describe('open files', () => {
  it('reads the soft limit from /proc/self/limits; unlimited or absent is unknown', () => {
    expect(openFilesLimit(LIMITS('1024', '524288'))).toBe(1024);
    expect(openFilesLimit(LIMITS('unlimited', 'unlimited'))).toBeUndefined();
    expect(openFilesLimit('')).toBeUndefined();
    if (process.platform === 'linux') expect(openFilesLimit()).toBeGreaterThan(0);
  });

  it('counts two descriptors a stream over HTTP/1.1 and about one over HTTP/2, after what is kept aside', () => {
    expect(streamsThatFit(1024, { http2: false, webhookConcurrency: 256 })).toBe(352);
    expect(streamsThatFit(1024, { http2: true, webhookConcurrency: 256 })).toBe(697);
    expect(streamsThatFit(20_000, { http2: false, webhookConcurrency: 256 })).toBe(9840);
    expect(streamsThatFit(100, { http2: false, webhookConcurrency: 256 })).toBe(0);
  });

  it('warns when the limit holds fewer streams than SVC_MAX_IN_FLIGHT, for each process of several, and not when it holds them', () => {
    const warned = (env: Record<string, string>, limit: number | undefined) => {
      const lines: string[] = [];
      warnIfFilesShort(loadConfig(env), { warn: (_fields: object, message: string) => lines.push(message) } as never, limit);
      return lines;
    };
    expect(warned({}, 1024)).toEqual([expect.stringMatching(/^this process may open 1024 files, enough for about 352 open streams, fewer than SVC_MAX_IN_FLIGHT=4096: /)]);
    expect(warned({ SVC_PROCESSES: '2' }, 1024)).toEqual([expect.stringMatching(/^each of the 2 server processes may open 1024 files/)]);
    expect(warned({ SVC_MAX_IN_FLIGHT: '300' }, 1024)).toEqual([]);
    expect(warned({}, undefined)).toEqual([]);
  });
});
