import { performance } from 'node:perf_hooks';
import type { ChatCompletionChunk, SvcResult } from '@svc/protocol';
import { ApiError } from '../http/errors.js';
import type { BatchHandler, CallSignal, ChunkStream, Upstream } from '../upstream/upstream.js';
import type { Metrics } from './metrics.js';

const seconds = (since: number) => (performance.now() - since) / 1000;

/** An upstream failure's label: its design §4 code (the offline model's 400s too), or `client_closed` when the caller aborted. */
function errorCode(err: unknown, signal: CallSignal): string {
  if (err instanceof ApiError) return err.code;
  if (signal.aborted) return 'client_closed';
  return 'internal_error';
}

/**
 * The same upstream, timing every call and counting failures by code (streams: until the last frame).
 *
 * @example
 * const upstream = instrumentUpstream(createOfflineModel(), metrics);
 */
export function instrumentUpstream(upstream: Upstream, metrics: Metrics): Upstream {
  return {
    async complete(request) {
      const started = performance.now();
      try {
        const completion = await upstream.complete(request);
        metrics.upstreamCall('complete', seconds(started));
        return completion;
      } catch (err) {
        metrics.upstreamCall('complete', seconds(started), errorCode(err, request.signal));
        throw err;
      }
    },
    async stream(request) {
      const started = performance.now();
      let chunks: ChunkStream;
      try {
        chunks = await upstream.stream(request);
      } catch (err) {
        metrics.upstreamCall('stream', seconds(started), errorCode(err, request.signal));
        throw err;
      }
      const record = (err?: unknown): void => {
        const code = err !== undefined ? errorCode(err, request.signal) : request.signal.aborted ? 'client_closed' : undefined;
        metrics.upstreamCall('stream', seconds(started), code);
      };
      let taken = false;
      return {
        each(handler) {
          taken = true;
          // The consumer's own failure (its client, the grounding check) is not the upstream's.
          let handlerFailed = false;
          const watched: BatchHandler = (batch) => {
            try {
              const behind = handler(batch);
              return behind?.catch((err: unknown) => {
                handlerFailed = true;
                throw err;
              });
            } catch (err) {
              handlerFailed = true;
              throw err;
            }
          };
          return chunks.each(watched).then(
            () => record(),
            (err: unknown) => {
              record(handlerFailed ? undefined : err);
              throw err;
            },
          );
        },
        cancel() {
          if (taken) return;
          taken = true;
          chunks.cancel();
          record();
        },
      };
    },
    close: () => upstream.close(),
  };
}

/** What `instrumentGrounder` measures: anything that checks an answer into an `svc` result (a `Grounder`). */
export interface GroundingCheck<Request> {
  check(request: Request): Promise<SvcResult>;
}

/**
 * The same grounder, timing each check and counting verdicts.
 *
 * @example
 * const grounder = instrumentGrounder(createOfflineGrounder(), metrics);
 */
export function instrumentGrounder<Request>(grounder: GroundingCheck<Request>, metrics: Metrics): GroundingCheck<Request> {
  return {
    async check(request) {
      const started = performance.now();
      const result = await grounder.check(request);
      metrics.groundingCheck(result, seconds(started));
      return result;
    },
  };
}
