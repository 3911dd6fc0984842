import { setTimeout as delay } from 'node:timers/promises';
import express, { type Router } from 'express';
import { singleQueryParam, type ResponseInputItem } from '@svc/protocol';
import { ApiError, quoted } from '../http/errors.js';
import { DATABASE_RETRY_AFTER_S } from '../http/to-api-error.js';
import { apiKeyOf, exchangeOf } from '../pipeline/express.js';
import { hasStoredEnd, runWithEnd } from './background-audit.js';
import { createResponse, type ResponsesDeps, type StreamingResponses } from './create.js';
import { EventLogs } from './event-log.js';
import { resumeStream } from './resume.js';

const MAX_LIST_LIMIT = 100;

/**
 * `/v1/responses` (behind the key and the rate limit, as every /v1 route): create, read back, delete, cancel
 * (a background one), and list a response's input items. A response of another key reads as not found.
 *
 * @example
 * v1.use('/responses', responsesRouter(deps));
 */
export function responsesRouter(deps: ResponsesDeps): Router {
  const router = express.Router();
  const streaming: StreamingResponses = new Map();
  const logs = new EventLogs({ store: deps.responseEvents, maxBytes: deps.config.responseStreamMaxBytes, logger: deps.logger });
  const create = createResponse(deps, logs, streaming);
  const resume = { ...deps, logs, stopping: deps.background.stopping };
  router.post('/', (_req, res) => create(exchangeOf(res), apiKeyOf(res)));
  // Read back as stored: the response's JSON is sent as it is (no parse and re-serialise of what may be
  // megabytes of echoed `instructions`), and the input items without the response beside them. With `stream=true`
  // (the SDKs' `retrieve(id, { stream: true, starting_after })`), a background stream's events again (resume.ts).
  router.get('/:id', async (req, res) => {
    const stream = queryParam(req.query, 'stream');
    if (stream !== undefined && stream !== 'true' && stream !== 'false') {
      throw new ApiError('invalid_value', `Invalid value for 'stream': expected true or false.`, { param: 'stream' });
    }
    const startingAfter = sequenceNumber(queryParam(req.query, 'starting_after'));
    if (stream === 'true') return resumeStream(resume, res, apiKeyOf(res).id, req.params.id, startingAfter);
    const json = await deps.responses.responseJson(apiKeyOf(res).id, req.params.id);
    if (json === undefined) throw notFound(req.params.id);
    res.type('json').send(json);
  });
  // A background response still running is stopped first (as a cancel stops it): its upstream call is not left to
  // run for a response nobody can read any more. One whose owner has not stopped it within the wait is ended here
  // (`endBeforeDelete`: cancelled, audited and counted once) and deleted: the owner stops a run that is no longer its
  // own at its next look (BackgroundResponses), and counts nothing.
  router.delete('/:id', async (req, res) => {
    const keyId = apiKeyOf(res).id;
    // A run whose end is stored with its audit still to record is found by nobody once its row is gone: `stopRun`
    // records that audit first, under the response's one delivery id (once, should its runner or a finder record it too).
    if (await deps.responses.runOf(keyId, req.params.id)) {
      await stopRun(deps, keyId, req.params.id);
      // Deleted now, a run whose audit could not be recorded would take that audit with it: kept, and the client's retry
      // (the SDKs retry a 503 by themselves) records it, as the server's look for lapsed runs would meanwhile.
      const failed = await endStored(deps, keyId, req.params.id);
      if (failed) {
        throw new ApiError(
          'database_unavailable',
          `Response '${quoted(req.params.id)}' was not deleted: its request's audit (webhook delivery and usage count) is still to record, and the database refused it just now. It is kept until that audit is recorded; retry the DELETE shortly.`,
          { headers: { 'retry-after': String(DATABASE_RETRY_AFTER_S) }, cause: failed.err },
        );
      }
      // One its owner did not stop within the wait is ended here, audited and counted once, before its row goes.
      if (!(await deps.background.endBeforeDelete(keyId, req.params.id))) deps.logger.warn({ response_id: req.params.id }, 'background response: deleted while its run went on (it changed under every try to end it first)');
    }
    if (!(await deps.responses.delete(keyId, req.params.id))) throw notFound(req.params.id);
    res.json({ id: req.params.id, object: 'response', deleted: true });
  });
  // OpenAI's `responses.cancel`: only a background response can be cancelled, and cancelling one that already
  // reached its final status returns it as it is. One still running is stopped wherever it runs: here at once, on
  // another process or instance through the cancel stored on its row, which its owner polls; the answer is the
  // response once it is `cancelled` (or whatever final status it reached first).
  router.post('/:id/cancel', async (req, res) => {
    const id = req.params.id;
    const keyId = apiKeyOf(res).id;
    let state = await deps.responses.state(keyId, id);
    if (state === undefined && streaming.get(id)?.keyId !== keyId) throw notFound(id);
    if (state === undefined || !createdInBackground(state.json)) {
      throw new ApiError(
        'invalid_request',
        `Only responses created with background=true can be cancelled; response '${id}' was not. Read it with GET /v1/responses/${id}, or delete it.`,
      );
    }
    if (state.running) {
      await stopRun(deps, keyId, id);
      // Its end is stored: the cancel has nothing left to do for the client. An audit the database refused just now is
      // svc's to record (logged; the server's look for lapsed runs records it once the cancel's hold lapses), not the
      // client's to retry: a 5xx would read as a failed cancel of a response that has ended.
      await endStored(deps, keyId, id);
      state = (await deps.responses.state(keyId, id)) ?? state;
    }
    res.type('json').send(state.json);
  });
  router.get('/:id/input_items', async (req, res) => {
    const query = { order: queryParam(req.query, 'order'), limit: queryParam(req.query, 'limit'), after: queryParam(req.query, 'after') };
    const items = await deps.responses.inputItems(apiKeyOf(res).id, req.params.id);
    if (!items) throw notFound(req.params.id);
    res.json(page(items, query));
  });
  return router;
}

/**
 * An item as OpenAI lists it, with its `status` (required of a listed function call, its output and an assistant
 * message): `completed` unless it was sent with one. Added here, so items stored without one list with it too.
 */
function withStatus(item: ResponseInputItem): ResponseInputItem {
  return 'status' in item && item.status != null ? item : { ...item, status: 'completed' };
}

/**
 * A stored response's `background`. Its JSON opens with fields svc writes itself (`id`, `object`, `created_at`,
 * `status`, `completed_at`, `background`: translate.ts), so the flag is read off the head rather than by parsing
 * what may be megabytes of echoed `instructions`; JSON of another shape is parsed.
 */
function createdInBackground(json: string): boolean {
  const head = /^\{"id":"[\w-]+","object":"response","created_at":\d+,"status":"\w+","completed_at":(?:\d+|null),"background":(true|false)[,}]/.exec(json);
  if (head) return head[1] === 'true';
  return (JSON.parse(json) as { background?: unknown }).background === true;
}

/** How long a cancel waits for another process or instance to stop the response: a few of its polls (CANCEL_POLL_MS). */
const CANCEL_WAIT_MS = 10_000;
/** How often the cancel reads the row meanwhile. */
const CANCEL_READ_MS = 100;

/**
 * Stops a background response's run: at once when this process runs it; else through the cancel stored on its row,
 * which its owner polls, reading the row every CANCEL_READ_MS until the run ended, for up to CANCEL_WAIT_MS. Past that
 * (its owner slow to poll) it resolves with the run still going, to stop shortly, and the client polls on, as after
 * OpenAI's cancel of a response that has not stopped yet. A run whose end is stored has nothing left to stop: should
 * its audit still be to record (its runner killed, or failed to record it), the caller records it and ends the run
 * (`endStored`), rather than waiting for it until its lease lapses.
 */
async function stopRun(deps: ResponsesDeps, keyId: string, id: string): Promise<void> {
  if (deps.background.has(id)) await deps.background.cancel(id);
  else if (await deps.responses.requestCancel(keyId, id, deps.clock())) {
    const deadline = deps.clock() + CANCEL_WAIT_MS;
    for (;;) {
      // One whose stored audit is garbled has its end stored all the same once its response ended (`runWithEnd`).
      const run = await runWithEnd(deps.responses, keyId, id);
      if (!run || hasStoredEnd(run) || deps.clock() >= deadline) break;
      await delay(CANCEL_READ_MS);
    }
  }
}

/**
 * Records the audit of a run whose end is stored and ends the run (`BackgroundResponses.endStored`); the failure of
 * that record, logged, when it failed (the run is left to the next try: the caller's, or the server's look for lapsed
 * runs once this try's hold on it lapses).
 */
async function endStored(deps: ResponsesDeps, keyId: string, id: string): Promise<{ err: unknown } | undefined> {
  try {
    await deps.background.endStored(keyId, id);
    return undefined;
  } catch (err) {
    deps.logger.error({ err, response_id: id }, 'background response: could not record the audit of its stored end; it is recorded again later');
    return { err };
  }
}

/** `starting_after`: the `sequence_number` of the last event the client holds, an integer of 0 or more. */
function sequenceNumber(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = /^\d{1,15}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value)) {
    throw new ApiError(
      'invalid_value',
      `Invalid value for 'starting_after': expected an integer of 0 or more, the sequence_number of the last event received (got '${quoted(text)}').`,
      { param: 'starting_after' },
    );
  }
  return value;
}

function notFound(id: string): ApiError {
  return new ApiError('not_found', `Response with id '${quoted(id)}' not found.`, { param: 'response_id' });
}

/**
 * A query parameter given at most once and without brackets, else a 400 naming it: read as a scalar, `limit[]=5`
 * would pass for 5 (`Number(['5'])`) and `order[a]=asc` for no `order` at all.
 */
function queryParam(query: Readonly<Record<string, unknown>>, name: string): string | undefined {
  const read = singleQueryParam(query, name);
  if (!read.ok) throw new ApiError('invalid_value', read.message, { param: name });
  return read.text;
}

/** OpenAI's list page over the items: `order` (default `desc`), `limit` (1–100, default 20), `after` an item id. */
function page(items: readonly ResponseInputItem[], query: { order: string | undefined; limit: string | undefined; after: string | undefined }) {
  const order = query.order ?? 'desc';
  if (order !== 'asc' && order !== 'desc') {
    throw new ApiError('invalid_value', `Invalid value for 'order': expected 'asc' or 'desc'.`, { param: 'order' });
  }
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw new ApiError('invalid_value', `Invalid value for 'limit': expected an integer from 1 to ${MAX_LIST_LIMIT}.`, { param: 'limit' });
  }
  const ordered = order === 'asc' ? [...items] : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const at = ordered.findIndex((item) => 'id' in item && item.id === query.after);
    if (at === -1) throw new ApiError('invalid_value', `No input item with id '${quoted(query.after)}'.`, { param: 'after' });
    start = at + 1;
  }
  const data = ordered.slice(start, start + limit).map(withStatus);
  const idOf = (item: ResponseInputItem | undefined) => (item && 'id' in item ? (item.id ?? null) : null);
  return { object: 'list', data, first_id: idOf(data[0]), last_id: idOf(data.at(-1)), has_more: start + limit < ordered.length };
}
