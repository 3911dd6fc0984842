import { createHash } from 'node:crypto';
import type { ResponseObject } from '@svc/protocol';
import type { AuditSink } from '../audit/audit-sink.js';
import { NO_USAGE } from '../chat/chat-context.js';
import type { ApiKeyRecord } from '../storage/keys-store.js';
import type { BackgroundAudit, ResponsesStore } from '../storage/responses-store.js';
import { toChatRequest } from './translate.js';

/** The status an audit gives a background response ended `failed` because nobody ran it any more: svc's own error. */
export const ORPHAN_STATUS = 500;

/**
 * The id of a background response's one audit delivery: the same whoever records it (the process that ran it, or
 * whoever ended it once nobody did), so that the outbox stores it once (`SequencedDelivery.once`) however many of
 * them try. Time-ordered like every delivery id, by the POST's arrival.
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
  responses: ResponsesStore;
  clock: () => number;
}

/**
 * Records the audit of a background response ended by whoever found that no process ran it any more (crashed, stopped
 * answering, left by a previous run). One ended `failed` because of that is audited as any failed request: status 500,
 * no answer, no tokens. One whose runner had stored its final state with the audit it was recording
 * (`BackgroundAudit.outcome`) is audited with that outcome. Either way the prompt is read back from what was stored,
 * the Usage view counts it as the request it was (on a key with no webhook URL too), and its delivery id is the
 * response's (`backgroundDeliveryId`): recorded once, also when its runner lived to record its own.
 */
export async function recordOrphanAudit(deps: OrphanAuditDeps, keyId: string, response: ResponseObject, stored: BackgroundAudit | undefined): Promise<void> {
  const key = await deps.keys.byId(keyId);
  if (!key) return;
  // A row stored before 019 kept none of these: the response's own id and time stand in.
  const audit = stored ?? { requestId: response.id, startedAt: response.created_at * 1000, streaming: false };
  const outcome = audit.outcome ?? {
    statusCode: ORPHAN_STATUS,
    finishedAt: Math.max(audit.startedAt, deps.clock()),
    responseText: '',
    svc: null,
    usage: NO_USAGE,
  };
  await deps.audit.record({
    requestId: audit.requestId,
    responseId: response.id,
    deliveryId: backgroundDeliveryId(response.id, audit.startedAt),
    key,
    startedAt: audit.startedAt,
    streaming: audit.streaming,
    messages: await storedMessages(deps.responses, keyId, response),
    ...outcome,
  });
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
