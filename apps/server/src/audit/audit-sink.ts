import type { SvcResult, Usage } from '@svc/protocol';
import type { ApiKeyRecord } from '../storage/keys-store.js';

/** Everything the audit trail needs about one finished chat-completion request. */
export interface CompletedRequest {
  requestId: string;
  /** The `resp_…` id a `/v1/responses` client was given, when it was given one. */
  responseId?: string;
  /**
   * The id of its audit delivery when the request has one audit whoever records it (a background response's, see
   * `backgroundDeliveryId`): a second record with the same id is no second delivery.
   */
  deliveryId?: string;
  /**
   * Left out of the Usage view by `record`, counted by `countUsage`: a background response's audit, which more than
   * one may record (its runner, whoever ends its run once its runner did not), is counted by the one that ends the run.
   */
  usageOnEnd?: true;
  key: ApiKeyRecord;
  /** Epoch ms when the request arrived. */
  startedAt: number;
  /** Epoch ms of the last byte (or of the moment the delivery is recorded, just before it). */
  finishedAt: number;
  statusCode: number;
  streaming: boolean;
  /** The request's messages as received (possibly invalid on a 400). */
  messages: unknown;
  /** First choice's content ("" on error). */
  responseText: string;
  /** First choice's refusal text, when the model refused (its `content` is then null or empty). */
  refusal?: string;
  /** null when the request failed before a check could run. */
  svc: SvcResult | null;
  usage: Usage;
}

/**
 * Records a finished request: usage counters, and the audit webhook in the outbox when the key has a URL.
 * Resolves once the delivery is durably recorded (the response's last byte is sent after that).
 */
export interface AuditSink {
  record(request: CompletedRequest): Promise<void>;
  /** Counts in the Usage view a request recorded with `usageOnEnd` (a sink that keeps no count has none). */
  countUsage?(request: CompletedRequest): void;
}
