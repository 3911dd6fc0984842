import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { ResponseObject } from '@svc/protocol';
import { BackgroundResponses } from '../../../src/responses/background.js';
import { openStore, type Store } from '../../../src/storage/store.js';
import { Cancellation } from '../../../src/upstream/upstream.js';
import { NO_WORKER, OutboxSink } from '../../../src/webhooks/outbox.js';
import { eventually } from '../../support/webhooks.js';
import { storedResponse } from '../../support/responses.js';

// BackgroundResponses over a real SQLite store, its clock in the test's hands: which leases its looks keep alive.

let dir: string;
let store: Store;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-background-'));
  store = await openStore(`sqlite:${join(dir, 'svc.db')}`);
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const running = (id: string): ResponseObject => ({ ...storedResponse({ id, createdAt: 1_000 }), status: 'in_progress', background: true, completed_at: null });

it("a response whose run ended here without its final state stored (the database failed then) ends failed when its lease lapses, though the process runs others", async () => {
  let now = 1_000_000;
  const background = new BackgroundResponses({
    store: store.responses,
    audit: new OutboxSink(store.deliveries, NO_WORKER),
    keys: store.keys,
    deliveries: store.deliveries,
    owner: 'worker-test',
    clock: () => now,
    logger: pino({ level: 'silent' }),
    leaseMs: 400,
    pollMs: 10,
  });
  await store.responses.save('key_a', running('resp_running'), [], 0, undefined, background.lease());
  // Its run is over (nothing in this process runs it), but its row still names this process.
  await store.responses.save('key_a', running('resp_left'), [], 0, undefined, background.lease());
  let finish!: () => void;
  const work = new Promise<void>((resolve) => (finish = resolve));
  const run = background.run('resp_running', new Cancellation(), () => work);
  background.start();
  try {
    // Both leases lapse unless pushed forward: only the one still running here is.
    now += 1_000;
    const left = await eventually(async () => {
      const state = await store.responses.state('key_a', 'resp_left');
      return state?.running === false ? state : undefined;
    }, 10_000);
    expect(JSON.parse(left.json)).toMatchObject({ status: 'failed', error: { code: 'server_error' } });
    expect((await store.responses.state('key_a', 'resp_running'))?.running).toBe(true);
  } finally {
    finish();
    await run;
    await background.stop(0);
  }
});
