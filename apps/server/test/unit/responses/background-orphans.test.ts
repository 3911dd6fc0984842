import { createHash } from 'node:crypto';
import type { KyselyPlugin } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditPayloadSchema, type ResponseObject } from '@svc/protocol';
import { openStore, type Store } from '../../../src/storage/store.js';
import { RESPONSE_PART_CHARS, ResponsesStore } from '../../../src/storage/responses-store.js';
import type { ApiKeyRecord } from '../../../src/storage/keys-store.js';
import { NO_WORKER, OutboxSink } from '../../../src/webhooks/outbox.js';
import { endOrphans, type OrphanDeps } from '../../../src/responses/background.js';
import { backgroundDeliveryId, recordOrphanAudit } from '../../../src/responses/background-audit.js';
import { queryPostgres, storeVariants } from '../../support/databases.js';
import { storedResponse } from '../../support/responses.js';

/**
 * The audit of a background response ended `failed` because nobody ran it any more, on SQLite and Postgres, with two
 * stores on one database standing for two instances: recorded once however many end it at once, once when an ender
 * stopped midway and another ends it after, and not again when its owner lived to record its own.
 */

const variants = await storeVariants('background orphans');

const logger = pino({ level: 'silent' });
const T0 = Date.parse('2026-11-30T12:00:00.000Z');
const MESSAGE = 'nobody runs it';

/**
 * The id an instance not yet upgraded records a background response's audit under, and finds it by (that id alone):
 * `whd_`, the POST's arrival in ms as 12 hex digits, then the first 20 of the response id's SHA-256.
 */
function idBeforeUpgrade(responseId: string, startedAt: number): string {
  return `whd_${startedAt.toString(16).padStart(12, '0')}${createHash('sha256').update(responseId).digest('hex').slice(0, 20)}`;
}

it('a background response\'s delivery id is the one an instance not yet upgraded records its audit under: in a rolling upgrade, whichever ends the run, the audit is delivered once', () => {
  expect(backgroundDeliveryId('resp_0123', T0 + 123)).toBe(idBeforeUpgrade('resp_0123', T0 + 123));
});

describe.each(variants)('background responses nobody runs, on %s', (_name, url) => {
  let one: Store;
  let two: Store;
  let key: ApiKeyRecord;
  let n = 0;

  beforeAll(async () => {
    one = await openStore(url);
    two = await openStore(url);
    const user = await one.users.create({ email: `orphans-${Date.now()}@example.test`, passwordHash: 'x', now: T0 });
    key = await one.keys.create({ userId: user.id, name: 'bg', prefix: 'sk-bg', keyHash: `hash-${Date.now()}`, now: T0, webhookUrl: 'https://receiver.example.test/hook' });
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
  });

  /** The deps of an instance on `store` whose clock reads `now`. */
  const deps = (store: Store, now: number): OrphanDeps => ({
    responses: store.responses,
    audit: new OutboxSink(store.deliveries, NO_WORKER),
    keys: store.keys,
    deliveries: store.deliveries,
    clock: () => now,
    logger,
  });

  /** A background response stored running by `owner`, whose lease ended at T0 + 20 s. */
  async function running(owner: string, instructions = 'Be brief.'): Promise<{ response: ResponseObject; requestId: string; startedAt: number }> {
    n += 1;
    const id = `resp_${_name}_${n}_${Date.now()}`;
    const response: ResponseObject = { ...storedResponse({ id, createdAt: Math.floor(T0 / 1000) }), status: 'in_progress', background: true, instructions };
    const requestId = `req_${id}`;
    const startedAt = T0 + 123;
    const input = [{ type: 'message' as const, id: `msg_in_${id}`, role: 'user' as const, content: [{ type: 'input_text' as const, text: 'Write a long novel.' }] }];
    await one.responses.save(key.id, response, input, 0, undefined, { owner, until: T0 + 20_000, audit: { requestId, startedAt, streaming: true } });
    return { response, requestId, startedAt };
  }

  async function auditsOf(requestId: string) {
    const { rows } = await one.deliveries.list(key.id, { limit: 100, requestId });
    return Promise.all(rows.map(async (row) => ({ id: row.id, payload: JSON.parse((await one.deliveries.payloadOf(row.id))!.payload) as Record<string, unknown> })));
  }

  it('two instances ending the same ones at once end and audit each once, as a failed request (500, no answer)', async () => {
    const runs = await Promise.all([running('dead-1'), running('dead-1'), running('dead-1')]);
    const later = T0 + 60_000;
    const ended = await Promise.all([
      endOrphans(deps(one, later), { lapsedBefore: later }, MESSAGE),
      endOrphans(deps(two, later), { lapsedBefore: later }, MESSAGE),
    ]);
    expect(ended[0] + ended[1]).toBe(3);
    for (const { response, requestId, startedAt } of runs) {
      const stored = JSON.parse((await one.responses.responseJson(key.id, response.id))!) as ResponseObject;
      expect(stored).toMatchObject({ status: 'failed', error: { code: 'server_error', message: MESSAGE } });
      const audits = await auditsOf(requestId);
      expect(audits).toHaveLength(1);
      const [{ id, payload }] = audits as [(typeof audits)[number]];
      expect(id).toBe(backgroundDeliveryId(response.id, startedAt));
      // The published payload schema's fields, as a failed request's: the spec's and svc's additions.
      expect(AuditPayloadSchema.safeParse(payload).success).toBe(true);
      expect(payload).toMatchObject({
        event: 'llm.request.completed',
        request_id: requestId,
        response_id: response.id,
        user_id: key.user_id,
        model: 'svc01',
        status_code: 500,
        streaming: true,
        input_tokens: 0,
        output_tokens: 0,
        total_tokens: 0,
        response_text: '',
        prompt: 'system: Be brief.\nuser: Write a long novel.',
        grounded: true,
        hallucination_score: 0,
        grounding_checked: false,
        latency_ms: later - startedAt,
        timestamp: new Date(later).toISOString(),
      });
    }
    // Numbered without a gap: no number was taken by an insert left out.
    const sequences = (await Promise.all(runs.map(async (r) => (await auditsOf(r.requestId))[0]!.payload.sequence as number))).sort((a, b) => a - b);
    expect(sequences[2]! - sequences[0]!).toBe(2);
  });

  it('an ender that stopped after taking one over (before or after its audit) leaves it to the next, which audits it once', async () => {
    const later = T0 + 60_000;
    // Stopped after taking over, before the audit.
    const first = await running('dead-2');
    expect(await one.responses.takeOver(key.id, first.response.id, { owner: 'dead-2', lease: T0 + 20_000 }, 'ender-gone-1', later + 20_000)).toBe(true);
    // Stopped after the audit, before the end was written.
    const second = await running('dead-2');
    expect(await one.responses.takeOver(key.id, second.response.id, { owner: 'dead-2', lease: T0 + 20_000 }, 'ender-gone-2', later + 20_000)).toBe(true);
    await recordOrphanAudit(deps(one, later), key.id, { ...second.response, status: 'failed' }, { requestId: second.requestId, startedAt: second.startedAt, streaming: true });
    // Taken over: not found again until the ender's own lease lapses.
    expect(await endOrphans(deps(two, later + 1_000), { lapsedBefore: later + 1_000 }, MESSAGE)).toBe(0);
    const after = later + 30_000;
    expect(await endOrphans(deps(two, after), { lapsedBefore: after }, MESSAGE)).toBe(2);
    for (const run of [first, second]) {
      expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ status: 'failed' });
      expect(await auditsOf(run.requestId)).toHaveLength(1);
    }
  });

  it('one whose stored audit is corrupt is ended and audited with what its response says, with a log line, and the others still are', async () => {
    const corrupt = await running('dead-3');
    const sound = await running('dead-3');
    await one.handle.db.updateTable('responses').set({ background_audit: '{"requestId": "req_cut' }).where('id', '=', corrupt.response.id).execute();
    const lines: string[] = [];
    const captured = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const later = T0 + 60_000;
    expect(await endOrphans({ ...deps(one, later), logger: captured }, { owner: 'dead-3' }, MESSAGE)).toBe(2);
    for (const run of [corrupt, sound]) {
      expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ status: 'failed', error: { message: MESSAGE } });
    }
    expect(await auditsOf(sound.requestId)).toHaveLength(1);
    // Its request id and start were in the audit lost: the response's own id and time stand in.
    const [audit, ...more] = await auditsOf(corrupt.response.id);
    expect(more).toEqual([]);
    expect(audit!.payload).toMatchObject({ request_id: corrupt.response.id, response_id: corrupt.response.id, status_code: 500, prompt: 'system: Be brief.\nuser: Write a long novel.' });
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.response_id === corrupt.response.id);
    expect(logged).toEqual([expect.objectContaining({ msg: expect.stringContaining('stored audit is not JSON') })]);
  });

  it('one whose runner stored its end and recorded its audit, then stopped, its stored audit garbled: the end rebuilt from its response is not delivered a second time', async () => {
    // Its POST arrived within a second (startedAt T0 + 123 ms), not on it: the response keeps only the second.
    const run = await running('dead-garbled');
    const answer = storedResponse({ id: run.response.id, createdAt: run.response.created_at, text: 'Once upon a time.' });
    const completed: ResponseObject = { ...run.response, status: 'completed', output: answer.output };
    const outcome = { statusCode: 200, finishedAt: T0 + 5_000, responseText: 'Once upon a time.', svc: null, usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } };
    const by = { owner: 'dead-garbled', until: T0 + 20_000 };
    expect(await one.responses.settle(key.id, completed, by, undefined, { requestId: run.requestId, startedAt: run.startedAt, streaming: true, outcome })).toBeDefined();
    // Its runner records its audit as create.ts does (under the response's delivery id), then stops before ending its run.
    const sink = new OutboxSink(one.deliveries, NO_WORKER);
    await sink.record({
      requestId: run.requestId,
      responseId: run.response.id,
      deliveryId: backgroundDeliveryId(run.response.id, run.startedAt),
      usageOnEnd: true,
      key,
      startedAt: run.startedAt,
      streaming: true,
      messages: [{ role: 'user', content: 'Write a long novel.' }],
      ...outcome,
    });
    await one.handle.db.updateTable('responses').set({ background_audit: '{"requestId":"req_' }).where('id', '=', run.response.id).execute();
    expect(await endOrphans(deps(two, T0 + 60_000), { owner: 'dead-garbled' }, MESSAGE)).toBe(0);
    expect(await one.responses.runOf(key.id, run.response.id)).toBeUndefined();
    expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ status: 'completed' });
    // One delivery of it, the runner's.
    const { rows } = await one.deliveries.list(key.id, { limit: 100 });
    const payloads = await Promise.all(rows.map(async (row) => JSON.parse((await one.deliveries.payloadOf(row.id))!.payload) as { response_id?: string; request_id: string }));
    expect(payloads.filter((p) => p.response_id === run.response.id)).toEqual([expect.objectContaining({ request_id: run.requestId, status_code: 200 })]);
  });

  it('a rolling upgrade: one whose runner, an instance not yet upgraded, recorded its audit (its id carrying the POST\'s milliseconds) and stopped before ending its run is not delivered again when this version ends it', async () => {
    const run = await running('dead-old');
    const completed: ResponseObject = { ...run.response, status: 'completed', output: storedResponse({ id: run.response.id, createdAt: run.response.created_at, text: 'Once upon a time.' }).output };
    const outcome = { statusCode: 200, finishedAt: T0 + 5_000, responseText: 'Once upon a time.', svc: null, usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } };
    expect(await one.responses.settle(key.id, completed, { owner: 'dead-old', until: T0 + 20_000 }, undefined, { requestId: run.requestId, startedAt: run.startedAt, streaming: true, outcome })).toBeDefined();
    await new OutboxSink(one.deliveries, NO_WORKER).record({
      requestId: run.requestId,
      responseId: run.response.id,
      deliveryId: idBeforeUpgrade(run.response.id, run.startedAt),
      usageOnEnd: true,
      key,
      startedAt: run.startedAt,
      streaming: true,
      messages: [{ role: 'user', content: 'Write a long novel.' }],
      ...outcome,
    });
    expect(await endOrphans(deps(two, T0 + 60_000), { owner: 'dead-old' }, MESSAGE)).toBe(0);
    expect(await one.responses.runOf(key.id, run.response.id)).toBeUndefined();
    expect((await auditsOf(run.requestId)).map((audit) => audit.id)).toEqual([idBeforeUpgrade(run.response.id, run.startedAt)]);
  });

  // A runner of the release before `countsOnEnd` counted the request in the Usage view as it recorded its audit; one of
  // this release counts it once its run ends. Whoever ends the run of a stored end counts it unless such an earlier
  // runner recorded it (a rolling upgrade: that runner stopped, or lost a race with a cancel or DELETE, before ending it).
  it.each([
    ['of the previous release, its audit recorded', false, true, 0],
    ['of the previous release, its audit not recorded', false, false, 1],
    ['of this release, its audit recorded (not counted)', true, true, 1],
  ] as const)('one whose end was stored by a runner %s, then ended by this release, is counted by its ender (countsOnEnd %s, recorded %s): %i time(s)', async (_runner, countsOnEnd, recorded, counted) => {
    const owner = `dead-count-${countsOnEnd}-${recorded}`;
    const run = await running(owner);
    const completed: ResponseObject = { ...run.response, status: 'completed', output: storedResponse({ id: run.response.id, createdAt: run.response.created_at, text: 'Once upon a time.' }).output };
    const outcome = { statusCode: 200, finishedAt: T0 + 5_000, responseText: 'Once upon a time.', svc: null, usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } };
    const audit = { requestId: run.requestId, startedAt: run.startedAt, streaming: true, outcome, ...(countsOnEnd && { countsOnEnd: true as const }) };
    expect(await one.responses.settle(key.id, completed, { owner, until: T0 + 20_000 }, undefined, audit)).toBeDefined();
    if (recorded) {
      await new OutboxSink(one.deliveries, NO_WORKER).record({
        requestId: run.requestId,
        responseId: run.response.id,
        deliveryId: idBeforeUpgrade(run.response.id, run.startedAt),
        key,
        startedAt: run.startedAt,
        streaming: true,
        messages: [{ role: 'user', content: 'Write a long novel.' }],
        ...outcome,
      });
    }
    const { finder, counted: countedBy } = finderAt(T0 + 60_000);
    expect(await endOrphans(finder, { owner }, MESSAGE)).toBe(0);
    expect(await one.responses.runOf(key.id, run.response.id)).toBeUndefined();
    expect(countedBy).toEqual(new Array(counted).fill(run.response.id));
    expect(await auditsOf(run.requestId)).toHaveLength(1);
  });

  it('recorded at once by two instances, one knowing the POST\'s milliseconds and one only its second (its stored audit lost): one delivery', async () => {
    for (let i = 0; i < 5; i++) {
      const run = await running('racing');
      const request = (store: Store, startedAt: number) =>
        new OutboxSink(store.deliveries, NO_WORKER).record({
          requestId: run.requestId,
          responseId: run.response.id,
          deliveryId: backgroundDeliveryId(run.response.id, startedAt),
          usageOnEnd: true,
          key,
          startedAt,
          streaming: true,
          messages: [{ role: 'user', content: 'Write a long novel.' }],
          statusCode: 200,
          finishedAt: T0 + 5_000,
          responseText: 'Once upon a time.',
          svc: null,
          usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
        });
      await Promise.all([request(one, run.startedAt), request(two, run.response.created_at * 1000)]);
      const { rows } = await one.deliveries.list(key.id, { limit: 100 });
      const payloads = await Promise.all(rows.map(async (row) => JSON.parse((await one.deliveries.payloadOf(row.id))!.payload) as { response_id?: string }));
      expect(payloads.filter((p) => p.response_id === run.response.id)).toHaveLength(1);
    }
  });

  it('one whose end was being written in parts when its writer stopped (parts missing, or of two writes) is ended failed and audited, and the others still are', async () => {
    const instructions = `Be brief. ${'x'.repeat(RESPONSE_PART_CHARS)}`;
    const parted = async () => {
      const run = await running('dead-4', instructions);
      expect(await one.responses.responseJson(key.id, run.response.id)).toBeDefined();
      return run;
    };
    // Stopped after its running parts made way for the end's (settle), before those were all written.
    const missing = await parted();
    await one.handle.db.deleteFrom('response_parts').where('response_id', '=', missing.response.id).where('field', '=', 'response').execute();
    // Stopped after the end's first part was written over the running one's.
    const mixed = await parted();
    await one.handle.db.updateTable('response_parts').set({ text: '{"id":"resp_cut' }).where('response_id', '=', mixed.response.id).where('seq', '=', 0).execute();
    const sound = await running('dead-4');
    const later = T0 + 60_000;
    expect(await endOrphans(deps(one, later), { owner: 'dead-4' }, MESSAGE)).toBe(3);
    for (const run of [missing, mixed, sound]) {
      expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ id: run.response.id, status: 'failed', error: { message: MESSAGE } });
      const audits = await auditsOf(run.requestId);
      expect(audits).toHaveLength(1);
      // What is left of it: its input items, kept apart from the parts lost.
      expect(audits[0]!.payload).toMatchObject({ response_id: run.response.id, status_code: 500, prompt: expect.stringContaining('user: Write a long novel.') });
    }
    expect(await one.responses.runOf(key.id, missing.response.id)).toBeUndefined();
  });

  it('one whose end was stored in parts with its audit to record, its parts then lost or mixed, is ended and audited with that outcome, and the others still are', async () => {
    const instructions = `Be brief. ${'x'.repeat(RESPONSE_PART_CHARS)}`;
    const later = T0 + 60_000;
    const outcome = { statusCode: 200, finishedAt: T0 + 5_000, responseText: 'Once upon a time.', svc: null, usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } };
    /** Stored running, then its end stored (in parts) with its audit to record: its runner killed before recording it. */
    const storedEnd = async () => {
      const run = await running('dead-5', instructions);
      const ended: ResponseObject = { ...run.response, status: 'completed', instructions };
      expect(await one.responses.settle(key.id, ended, { owner: 'dead-5', until: T0 + 20_000 }, undefined, { requestId: run.requestId, startedAt: run.startedAt, streaming: true, outcome })).toBeDefined();
      return run;
    };
    const missing = await storedEnd();
    // The end's response parts: a generation of their own (`response#…`), as the running response was in parts too.
    await one.handle.db.deleteFrom('response_parts').where('response_id', '=', missing.response.id).where('field', 'like', 'response%').where('seq', '=', 1).execute();
    const mixed = await storedEnd();
    await one.handle.db.updateTable('response_parts').set({ text: '{"id":"resp_cut' }).where('response_id', '=', mixed.response.id).where('field', 'like', 'response%').where('seq', '=', 0).execute();
    const sound = await running('dead-5');
    expect(await endOrphans(deps(one, later), { owner: 'dead-5' }, MESSAGE)).toBe(1);
    for (const run of [missing, mixed]) {
      // Its run ended: not found again, and purged with the rest once past SVC_RETENTION_DAYS.
      expect(await one.responses.runOf(key.id, run.response.id)).toBeUndefined();
      const audits = await auditsOf(run.requestId);
      expect(audits).toHaveLength(1);
      expect(audits[0]!.payload).toMatchObject({ response_id: run.response.id, status_code: 200, response_text: 'Once upon a time.', prompt: expect.stringContaining('user: Write a long novel.') });
      // Read back as ended failed, saying why, rather than as the parts left.
      expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ id: run.response.id, status: 'failed', error: { code: 'server_error' } });
    }
    expect(await one.responses.runOf(key.id, sound.response.id)).toBeUndefined();
    expect(await auditsOf(sound.requestId)).toHaveLength(1);
  });

  /**
   * A runner's store (on `one`) whose `settle` is held right after its claim, until `release`: a writer slower than
   * its lease there (a pause of its process, a slow database) while a finder takes its run over.
   */
  function heldAfterClaim(): { store: ResponsesStore; atHold: Promise<void>; release: () => void } {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let reached!: () => void;
    const atHold = new Promise<void>((resolve) => (reached = resolve));
    const holding = new WeakSet<object>();
    let claims = 0;
    const plugin: KyselyPlugin = {
      transformQuery: (args) => {
        const node = args.node as { kind: string; table?: { table?: { identifier?: { name?: string } } } };
        // The settle's first update of its row is its claim.
        if (node.kind === 'UpdateQueryNode' && node.table?.table?.identifier?.name === 'responses' && claims++ === 0) holding.add(args.queryId);
        return args.node;
      },
      transformResult: async (args) => {
        if (holding.has(args.queryId)) {
          reached();
          await held;
        }
        return args.result;
      },
    };
    return { store: new ResponsesStore(one.handle.db.withPlugin(plugin), one.handle.dialect), atHold, release };
  }

  /** A finder on `two` whose clock reads `now`, and the responses it counted in the Usage view. */
  function finderAt(now: number): { finder: OrphanDeps; counted: string[] } {
    const counted: string[] = [];
    const sink = new OutboxSink(two.deliveries, NO_WORKER);
    const finder = { ...deps(two, now), audit: { record: (r: Parameters<OutboxSink['record']>[0]) => sink.record(r), countUsage: (r: { responseId?: string }) => void counted.push(r.responseId!) } };
    return { finder, counted };
  }

  it('a runner whose store of its end was slower than its lease, its run ended meanwhile by a finder, does not write its end over the finder\'s', async () => {
    const run = await running('slow-writer');
    const later = T0 + 60_000;
    // The runner's settle is held after its claim until the finder is done.
    const slow = heldAfterClaim();
    const outcome = { statusCode: 200, finishedAt: T0 + 25_000, responseText: 'Once upon a time.', svc: null, usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } };
    const settling = slow.store.settle(key.id, { ...run.response, status: 'completed' }, { owner: 'slow-writer', until: T0 + 20_000 }, undefined, {
      requestId: run.requestId,
      startedAt: run.startedAt,
      streaming: true,
      outcome,
    });
    await slow.atHold;
    // Its claim's lease lapsed: a finder takes the run over and ends it failed, audited and counted.
    const { finder, counted } = finderAt(later);
    await endOrphans(finder, { lapsedBefore: later }, MESSAGE);
    expect(counted).toContain(run.response.id);
    slow.release();
    // The runner learns its run is no longer its own (its audit is then left out, its count the finder's).
    expect(await settling).toBeUndefined();
    expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ status: 'failed', error: { message: MESSAGE } });
    expect(await one.responses.runOf(key.id, run.response.id)).toBeUndefined();
    expect(await auditsOf(run.requestId)).toHaveLength(1);
  });

  it('a runner that lost its run after its claim writes no part of its end: the finder\'s end, in parts, reads back whole, its parts alone kept', async () => {
    // Over a part of echoed instructions: the running response and the finder's end are kept in parts, and the
    // runner's end (with an answer of two parts more) in more of them.
    const run = await running('slow-parts', 'Be brief. '.repeat(RESPONSE_PART_CHARS / 10 + 100));
    const later = T0 + 60_000;
    const slow = heldAfterClaim();
    const answer = storedResponse({ id: run.response.id, createdAt: run.response.created_at, text: 'Once upon a time. '.repeat(Math.ceil((2 * RESPONSE_PART_CHARS) / 18)) });
    const completed: ResponseObject = { ...run.response, status: 'completed', output: answer.output };
    const outcome = { statusCode: 200, finishedAt: T0 + 25_000, responseText: 'Once upon a time.', svc: null, usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } };
    const settling = slow.store.settle(key.id, completed, { owner: 'slow-parts', until: T0 + 20_000 }, undefined, { requestId: run.requestId, startedAt: run.startedAt, streaming: true, outcome });
    await slow.atHold;
    const { finder, counted } = finderAt(later);
    expect(await endOrphans(finder, { lapsedBefore: later }, MESSAGE)).toBe(1);
    // Read on `two`: the held runner holds `one`'s SQLite connection.
    const partsOf = () =>
      two.handle.db.selectFrom('response_parts').select(['field', 'seq', 'text']).where('response_id', '=', run.response.id).orderBy('field').orderBy('seq').execute();
    const finders = await partsOf();
    expect(finders.length).toBeGreaterThan(1);
    slow.release();
    expect(await settling).toBeUndefined();
    // One end, the finder's, read back whole; its parts alone, none of the runner's; none of the runner's items indexed.
    expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ id: run.response.id, status: 'failed', error: { message: MESSAGE }, instructions: run.response.instructions });
    expect(await partsOf()).toEqual(finders);
    expect(await one.handle.db.selectFrom('response_items').select('id').where('response_id', '=', run.response.id).execute()).toEqual([]);
    expect(await one.responses.runOf(key.id, run.response.id)).toBeUndefined();
    expect(counted).toEqual([run.response.id]);
    expect(await auditsOf(run.requestId)).toHaveLength(1);
  });

  it.skipIf(_name !== 'postgres')("a runner's store of its end in parts checks its claim before each part without writing its row (Postgres: no new row version per part)", async () => {
    const run = await running('many-parts');
    const answer = storedResponse({ id: run.response.id, createdAt: run.response.created_at, text: 'Once upon a time. '.repeat(Math.ceil((3 * RESPONSE_PART_CHARS) / 18)) });
    const completed: ResponseObject = { ...run.response, status: 'completed', output: answer.output };
    // The row's version (xmin) once the claim is written, and once every part and item is written under it, before
    // the final write: a check that updated the row would have made a new version each time.
    const version = async () => (await queryPostgres<{ v: string }>(url, 'select xmin::text as v from responses where id = $1', [run.response.id]))[0]!.v;
    const store = one.responses as unknown as {
      whileClaimed: (claim: unknown, write: unknown) => Promise<void>;
      indexOutputItems: (...args: unknown[]) => Promise<void>;
    };
    const whileClaimed = store.whileClaimed.bind(store);
    const indexOutputItems = store.indexOutputItems.bind(store);
    let checks = 0;
    let claimed: string | undefined;
    let beforeFinalWrite: string | undefined;
    store.whileClaimed = async (claim, write) => {
      if (claim) {
        checks += 1;
        claimed ??= await version();
      }
      return whileClaimed(claim, write);
    };
    store.indexOutputItems = async (...args) => {
      await indexOutputItems(...args);
      beforeFinalWrite = await version();
    };
    try {
      const outcome = { statusCode: 200, finishedAt: T0 + 5_000, responseText: 'Once upon a time.', svc: null, usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } };
      const settled = await one.responses.settle(key.id, completed, { owner: 'many-parts', until: T0 + 20_000 }, undefined, { requestId: run.requestId, startedAt: run.startedAt, streaming: true, outcome });
      expect(settled).toBeDefined();
    } finally {
      store.whileClaimed = whileClaimed;
      store.indexOutputItems = indexOutputItems;
    }
    // Its old parts deleted, three or more parts of its answer, and its item indexed: each a check of the claim.
    expect(checks).toBeGreaterThanOrEqual(5);
    expect(claimed).toBeDefined();
    expect(beforeFinalWrite).toBe(claimed);
    expect(JSON.parse((await one.responses.responseJson(key.id, run.response.id))!)).toMatchObject({ id: run.response.id, status: 'completed' });
  });

  it("an owner that lived to end it after it was ended records no second audit, and takes no sequence number", async () => {
    const run = await running('slow-owner');
    const later = T0 + 60_000;
    expect(await endOrphans(deps(one, later), { owner: 'slow-owner' }, MESSAGE)).toBe(1);
    const [audit] = await auditsOf(run.requestId);
    // The owner's end: its settle finds the run no longer its own, its audit (same delivery id) is left out.
    expect(await one.responses.settle(key.id, { ...run.response, status: 'completed' }, { owner: 'slow-owner', until: later + 20_000 })).toBeUndefined();
    const sink = new OutboxSink(two.deliveries, NO_WORKER);
    const owners = {
      requestId: run.requestId,
      responseId: run.response.id,
      deliveryId: backgroundDeliveryId(run.response.id, run.startedAt),
      key,
      startedAt: run.startedAt,
      finishedAt: later,
      statusCode: 200,
      streaming: true,
      messages: [{ role: 'user', content: 'Write a long novel.' }],
      responseText: 'Once upon a time.',
      svc: null,
      usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
    };
    // With another request's audit in the same insert: that one is recorded, numbered next.
    const { deliveryId: _, ...another } = owners;
    await Promise.all([sink.record(owners), sink.record({ ...another, requestId: `${run.requestId}-next` })]);
    expect(await auditsOf(run.requestId)).toEqual([audit]);
    const [next] = await auditsOf(`${run.requestId}-next`);
    expect(next!.payload.sequence).toBe((audit!.payload.sequence as number) + 1);
  });
});
