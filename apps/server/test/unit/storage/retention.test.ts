import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Retention } from '../../../src/storage/retention.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { storedResponse } from '../../support/responses.js';

const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), 'svc-retention-'));
let store: Store;

beforeAll(async () => {
  store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
});
afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const response = (id: string, createdAtMs: number) => storedResponse({ id, createdAt: Math.floor(createdAtMs / 1000) });

describe('Retention', () => {
  it('purges stored responses past SVC_RETENTION_DAYS and keeps younger ones; a failing store does not stop the others', async () => {
    const now = 100 * DAY;
    await store.responses.save('key', response('resp_old', now - 31 * DAY), []);
    await store.responses.save('key', response('resp_new', now - 29 * DAY), []);
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const failing = { purgeOlderThan: async () => Promise.reject(new Error('disk on fire')) };
    const retention = new Retention({ stores: { broken: failing, responses: store.responses }, retentionDays: 30, clock: () => now, logger });
    await retention.purge();
    expect(await store.responses.responseJson('key', 'resp_old')).toBeUndefined();
    expect(await store.responses.responseJson('key', 'resp_new')).toBeDefined();
    expect(lines.join('')).toContain('could not purge old broken');
    expect(lines.join('')).toContain('purged old responses');
  });
});
