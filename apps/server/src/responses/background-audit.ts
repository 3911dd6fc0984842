import { createHash } from 'node:crypto';
import { ERROR_CODES, SVC_MODEL, type ErrorCode, type ResponseObject } from '@svc/protocol';
import type { AuditSink, CompletedRequest } from '../audit/audit-sink.js';
import { NO_USAGE } from '../chat/chat-context.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { OutboxStore } from '../storage/outbox-store.js';
import { parseStoredJsonInTurns } from '../json-in-turns.js';
import type { AuditOutcome, BackgroundAudit, Orphan, ResponsesStore } from '../storage/responses-store.js';
import { turns } from '../turns.js';
import { outputText, pendingResponse, toChatRequest } from './translate.js';

/** The status an audit gives a background response ended `failed` because nobody ran it any more: svc's own error. */
export const ORPHAN_STATUS = 500;

/** The status of a background response's audit when it was cancelled (`CancelRequested`): its client's later request ended it. */
const CANCELLED_STATUS = 409;

/**
 * The id of a background response's one audit delivery: the same whoever records it (the process that ran it, or
 * whoever ended it once nobody did), so that the outbox stores it once (`SequencedDelivery.once`) however many of
 * them try. Time-ordered like every delivery id, by the POST's arrival to the millisecond, as every version of svc
 * makes it: during a rolling upgrade an instance not yet upgraded finds it by that id alone. The audit of one whose
 * stored audit is lost (`rebuiltStoredEnd`) knows only the second its response keeps; the outbox takes the ids of
 * one response within one second for one delivery (`onceSpan`).
 *
 * @example
 * const id = backgroundDeliveryId('resp_0123…', Date.parse('2026-11-30T12:00:00Z')); // 'whd_019…'
 */
export function backgroundDeliveryId(responseId: string, startedAt: number): string {
  const time = Math.max(0, Math.floor(startedAt)).toString(16).padStart(12, '0').slice(-12);
  return `whd_${time}${createHash('sha256').update(responseId).digest('hex').slice(0, 20)}`;
}

export interface OrphanAuditDeps {
  /** The audit trail the request would have been recorded in (the webhook's outbox). */
  audit: AuditSink;
  keys: { byId(id: string): Promise<ApiKeyRecord | undefined> };
  /** Whether an audit is recorded already: one an earlier release's runner recorded it counted then (`countsOnEnd`). */
  deliveries: Pick<OutboxStore, 'recordedOnce'>;
  responses: ResponsesStore;
  clock: () => number;
}

/**
 * Records the audit of a background response ended by whoever found that no process ran it any more (crashed, stopped
 * answering, left by a previous run). One ended `failed` because of that is audited as any failed request: status 500,
 * no answer, no tokens; one ended `cancelled` (by the DELETE of a response whose owner did not stop it), 409. One whose
 * runner had stored its final state with the audit it was recording (`BackgroundAudit.outcome`) is audited with that
 * outcome. Either way the prompt is read back from what was stored,
 * the Usage view counts it as the request it was (on a key with no webhook URL too), and its delivery id is the
 * response's (`backgroundDeliveryId`): recorded once, also when its runner lived to record its own.
 */
export async function recordOrphanAudit(
  deps: OrphanAuditDeps,
  keyId: string,
  response: ResponseObject,
  stored: BackgroundAudit | undefined,
): Promise<CompletedRequest | undefined> {
  const key = await deps.keys.byId(keyId);
  if (!key) return undefined;
  // A row stored before 019 kept none of these: the response's own id and time stand in.
  const audit = stored ?? { requestId: response.id, startedAt: response.created_at * 1000, streaming: false };
  const outcome = audit.outcome ?? {
    statusCode: response.status === 'cancelled' ? CANCELLED_STATUS : ORPHAN_STATUS,
    finishedAt: Math.max(audit.startedAt, deps.clock()),
    responseText: '',
    svc: null,
    usage: NO_USAGE,
  };
  const request: CompletedRequest = {
    requestId: audit.requestId,
    responseId: response.id,
    deliveryId: backgroundDeliveryId(response.id, audit.startedAt),
    // Counted by whoever ends the run (`countUsage`): once, however many record it.
    usageOnEnd: true,
    key,
    startedAt: audit.startedAt,
    streaming: audit.streaming,
    messages: await storedMessages(deps.responses, keyId, response),
    ...outcome,
  };
  await deps.audit.record(request);
  return request;
}

/** A background response's run as `ResponsesStore.runOf` (or `orphans`) found it, its end stored with its audit. */
export type StoredEnd = Pick<Orphan, 'owner' | 'lease'> & { audit: BackgroundAudit & { outcome: AuditOutcome } };

/** The statuses a background response ends in: stored with one, its run's end is stored. */
const ENDED = new Set<ResponseObject['status']>(['completed', 'incomplete', 'failed', 'cancelled']);

/**
 * The run of a response whose stored audit cannot be read (not JSON: a write of it garbled) as if its audit were
 * whole, rebuilt from the stored response when that one has ended: its end and its audit are written in one
 * statement, so an ended response is a stored end, and what it says (status, answer, usage, grounding) is what its
 * audit was to say. The POST's request id and arrival time are lost with the audit: the response's own id and time
 * stand in, as for a row stored before them. Undefined when the response has not ended (nothing to keep).
 *
 * @example
 * const run = rebuiltStoredEnd(orphan, await readStoredResponse(orphan.json, orphan.id));
 * if (run) await recordStoredEnd(deps, orphan.keyId, orphan.id, run, by, orphan);
 */
export function rebuiltStoredEnd(run: Pick<Orphan, 'owner' | 'lease'>, response: ResponseObject | undefined): StoredEnd | undefined {
  if (!response || !ENDED.has(response.status)) return undefined;
  const usage = response.usage;
  const startedAt = response.created_at * 1000;
  const outcome: AuditOutcome = {
    statusCode: endedStatusCode(response),
    finishedAt: Math.max(startedAt, (response.completed_at ?? response.created_at) * 1000),
    responseText: outputText(response.output),
    svc: (response as { svc?: AuditOutcome['svc'] }).svc ?? null,
    usage: usage ? { prompt_tokens: usage.input_tokens, completion_tokens: usage.output_tokens, total_tokens: usage.total_tokens } : NO_USAGE,
  };
  // Which release stored it is lost with its audit: counted on end, as this release's runner would.
  return { owner: run.owner, lease: run.lease, audit: { requestId: response.id, startedAt, streaming: false, outcome, countsOnEnd: true } };
}

/** The status an ended response's audit gives it: 200 answered (cut by its token limit too), 409 cancelled, a failure's own. */
function endedStatusCode(response: ResponseObject): number {
  if (response.status === 'cancelled') return CANCELLED_STATUS;
  if (response.status !== 'failed') return 200;
  const code = response.error?.code;
  return (code && code in ERROR_CODES ? ERROR_CODES[code as ErrorCode].status : undefined) ?? ORPHAN_STATUS;
}

/**
 * The run of response `id` as `ResponsesStore.runOf` finds it (undefined when it is not running), its end rebuilt
 * from the response when its stored audit cannot be read and the response has ended (`rebuiltStoredEnd`): that run
 * has its end stored as surely as one whose audit reads back, and nothing is left to wait for in it.
 *
 * @example
 * const run = await runWithEnd(store.responses, keyId, id);
 * if (hasStoredEnd(run)) await recordStoredEnd(deps, keyId, id, run, by);
 */
export async function runWithEnd(responses: ResponsesStore, keyId: string, id: string): Promise<Awaited<ReturnType<ResponsesStore['runOf']>> | StoredEnd> {
  const found = await responses.runOf(keyId, id);
  if (!found?.auditUnreadable) return found;
  return rebuiltStoredEnd(found, await readStoredResponse(await responses.responseJson(keyId, id), id)) ?? found;
}

/** Whether the run found has its end stored, its audit perhaps still to record. */
export function hasStoredEnd(run: Pick<Orphan, 'owner' | 'lease' | 'audit'> | undefined): run is StoredEnd {
  return run?.audit?.outcome !== undefined;
}

/**
 * Ends the run of a background response whose runner stored its end with the audit it was recording (`settle` with
 * an audit) and has not ended it (`auditRecorded`): it died, failed to record it, or is about to. Taken over first
 * (`takeOver`), so that of those who try (its runner, whoever finds it nobody's, a cancel or a DELETE that finds
 * nothing left to stop) one ends it; the audit recorded under the response's one delivery id, so once also should its
 * runner record it too, and counted in the Usage view by the one that ended the run. Whether this call ended it.
 *
 * @example
 * const run = await responses.runOf(keyId, id);
 * if (hasStoredEnd(run)) await recordStoredEnd(deps, keyId, id, run, { owner: `ender-${randomUUID()}`, until: clock() + BACKGROUND_LEASE_MS });
 */
export async function recordStoredEnd(
  deps: OrphanAuditDeps,
  keyId: string,
  id: string,
  run: StoredEnd,
  by: { owner: string; until: number },
  found?: Pick<Orphan, 'json' | 'createdAt' | 'previousResponseId'>,
): Promise<boolean> {
  if (!(await deps.responses.takeOver(keyId, id, run, by.owner, by.until))) return false;
  // Its runner, of a release before `countsOnEnd` (a rolling upgrade), counted the request in the Usage view when it
  // recorded the audit: recorded, it is not counted again here. Looked at before this record, which would find itself.
  // (On a key with no webhook URL nothing is recorded to tell by, and it is counted here as before.)
  const countedByRunner = run.audit.countsOnEnd !== true && (await deps.deliveries.recordedOnce(backgroundDeliveryId(id, run.audit.startedAt)));
  const count = (request: CompletedRequest | undefined) => {
    if (request && !countedByRunner) deps.audit.countUsage?.(request);
  };
  const text = found ? found.json : await deps.responses.responseJson(keyId, id);
  const response = await readStoredResponse(text, id);
  if (response === undefined) {
    // Its end cannot be read back (its parts lost or mixed: two writers; or the row deleted since it was taken): its
    // audit is recorded all the same, with the outcome stored, and the run ended failed, saying so. Left as it was,
    // it would be taken and given up by every finder, never ended, and kept by the retention purge for good.
    const failed: ResponseObject = {
      ...standInResponse(id, found?.createdAt ?? Math.floor(run.audit.startedAt / 1000), found?.previousResponseId ?? null),
      status: 'failed',
      error: { code: 'server_error', message: UNREADABLE_END },
    };
    const request = await recordOrphanAudit(deps, keyId, failed, run.audit);
    if ((await deps.responses.settle(keyId, failed, by)) === undefined) return false;
    count(request);
    return true;
  }
  const request = await recordOrphanAudit(deps, keyId, response, run.audit);
  if (!(await deps.responses.auditRecorded(keyId, id, by.owner))) return false;
  count(request);
  return true;
}

/** The `error.message` of a background response whose stored end could not be read back when its run was ended. */
export const UNREADABLE_END = 'svc could not read back the stored end of this background response (a write of it stopped midway); send the request again.';

/**
 * A stored response's JSON read back (megabytes: parsed in turns of the event loop); undefined when there is none or it
 * cannot be read (a part missing, or parts of two writes: not JSON, or not this response's).
 */
export async function readStoredResponse(text: string | undefined, id: string): Promise<ResponseObject | undefined> {
  if (text === undefined) return undefined;
  try {
    const read = (await parseStoredJsonInTurns(text, turns())) as ResponseObject | null;
    return read?.id === id ? read : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What stands in for a background response whose JSON cannot be read back: its id, time and chain as its row keeps
 * them (its input items are kept apart, and its audit reads them); what it echoed of its request is lost with it.
 */
export function standInResponse(id: string, createdAt: number, previousResponseId: string | null): ResponseObject {
  return pendingResponse({ id, createdAt, request: { model: SVC_MODEL, input: [], background: true, previous_response_id: previousResponseId } });
}

/**
 * The chat messages the response was generated from, as its POST sent them upstream: its instructions, then the
 * conversation and input stored with it (what is left of them: a link of the chain deleted meanwhile is missing).
 */
async function storedMessages(responses: ResponsesStore, keyId: string, response: ResponseObject): Promise<unknown[]> {
  const items = (await responses.inputItems(keyId, response.id)) ?? [];
  try {
    return (await toChatRequest({ model: response.model, instructions: response.instructions, input: items }, [])).messages;
  } catch {
    // Items no request could be made of any more (a call whose output went with a deleted link): rendered as they are.
    return [...(response.instructions ? [{ role: 'system', content: response.instructions }] : []), ...items];
  }
}
