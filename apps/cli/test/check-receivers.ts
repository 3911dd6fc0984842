import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createDeduper, signWebhook, verifySignature, verifyWebhook } from '@svc/verify';
import { verifyMiddleware } from '@svc/verify/express';
import { createWebhookHandler, errorResponse, verifyRequest, WebhookVerificationError } from '@svc/verify/fetch';

/** Receivers for `webhooks check-receiver`: the adapters' own (correct) and deliberately broken ones. */
export interface TestReceiver {
  url: string;
  /** Delivery ids processed, in order (a duplicate processed twice shows twice). */
  processed: string[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

async function serve(handler: Handler, processed: string[]): Promise<TestReceiver> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/webhooks/svc`,
    processed,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The tiny in-memory de-duplication a receiver needs: a delivery id seen before is answered 200 with
 * `Svc-Duplicate: true` and not processed again. Returns whether to process.
 */
function dedupe(seen: Set<string>, id: string, res: ServerResponse): boolean {
  if (seen.has(id)) {
    res.writeHead(200, { 'svc-duplicate': 'true', 'content-type': 'text/plain' }).end('duplicate');
    return false;
  }
  seen.add(id);
  return true;
}

const deliveryIdOf = (req: IncomingMessage): string => String(req.headers['webhook-id'] ?? req.headers['x-svc-delivery'] ?? '');

/** `@svc/verify/express`'s `verifyMiddleware` with its `dedupe` option: a correct receiver. */
export async function expressReceiver(secret: string): Promise<TestReceiver> {
  const processed: string[] = [];
  const app = express();
  app.post('/webhooks/svc', verifyMiddleware({ secret, dedupe: createDeduper() }), (req, res) => {
    processed.push(deliveryIdOf(req));
    res.sendStatus(204);
  });
  return serve(app as unknown as Handler, processed);
}

/**
 * `expressReceiver`'s route in a router the app mounts under `/api` (`url` includes it), as an app behind a path
 * prefix has it; without the prefix the app answers 404. `redirectFrom`, when given, answers POSTs there with a 308 to
 * `url` (an http→https or trailing-slash redirect), which svc does not follow.
 */
export async function prefixedExpressReceiver(secret: string): Promise<TestReceiver & { redirectFrom: string }> {
  const processed: string[] = [];
  const app = express();
  const router = express.Router();
  router.post('/webhooks/svc', verifyMiddleware({ secret, dedupe: createDeduper() }), (req, res) => {
    processed.push(deliveryIdOf(req));
    res.sendStatus(204);
  });
  app.use('/api', router);
  app.post('/old/webhooks', (_req, res) => res.redirect(308, '/api/webhooks/svc'));
  const receiver = await serve(app as unknown as Handler, processed);
  const origin = new URL(receiver.url).origin;
  return { ...receiver, url: `${origin}/api/webhooks/svc`, redirectFrom: `${origin}/old/webhooks` };
}

/** The classic mistake: `app.use(express.json())` before `verifyMiddleware`; Express's default error page answers. */
export async function expressJsonFirstReceiver(secret: string): Promise<TestReceiver> {
  const app = express();
  app.use(express.json());
  app.post('/webhooks/svc', verifyMiddleware({ secret }), (_req, res) => void res.sendStatus(204));
  return serve(app as unknown as Handler, []);
}

/** @svc/verify's README receiver "without the middleware": `express.raw` and `verifyWebhook`, no de-duplication. */
export async function expressRawReceiver(secret: string): Promise<TestReceiver> {
  const processed: string[] = [];
  const app = express();
  app.post('/webhooks/svc', express.raw({ type: 'application/json', limit: '64mb' }), (req, res) => {
    if (!verifyWebhook(req.body as Buffer, req.headers, secret)) return void res.sendStatus(401);
    JSON.parse((req.body as Buffer).toString('utf8'));
    processed.push(deliveryIdOf(req));
    res.sendStatus(204);
  });
  return serve(app as unknown as Handler, processed);
}

/** `@svc/verify/fetch`'s `createWebhookHandler` with `dedupe`, on node:http (a Request built from the incoming message): correct. */
export async function fetchReceiver(secret: string): Promise<TestReceiver> {
  const processed: string[] = [];
  const handle = createWebhookHandler({ secret, dedupe: createDeduper() }, (_event, request) => {
    processed.push(request.headers.get('webhook-id') ?? '');
    return new Response(null, { status: 204 });
  });
  return serve((req, res) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(name, value);
      const request = new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body: Buffer.concat(chunks) });
      const response = await handle(request);
      res.writeHead(response.status, Object.fromEntries(response.headers)).end(Buffer.from(await response.arrayBuffer()));
    })();
  }, processed);
}

export type BrokenKind =
  | 'accepts-everything'
  | 'skips-missing-signature'
  | 'ignores-timestamp'
  | 'github-style-only'
  | 'reserialises-json'
  | 'no-dedupe'
  | 'single-signature'
  | 'small-body-limit'
  | 'hangs';

/** What each broken receiver must fail: exactly these cases. */
export const BROKEN_FAILS: Record<Exclude<BrokenKind, 'hangs'>, string[]> = {
  'accepts-everything': ['tampered-body', 'wrong-signature', 'missing-signature', 'stale-timestamp', 'unknown-secret'],
  'skips-missing-signature': ['missing-signature'],
  'ignores-timestamp': ['stale-timestamp'],
  'github-style-only': ['stale-timestamp'],
  'reserialises-json': ['exact-bytes'],
  'no-dedupe': ['duplicate'],
  'single-signature': ['rotation'],
  'small-body-limit': ['large-body'],
};

/** A receiver with one realistic mistake (and otherwise correct, de-duplication included unless `no-dedupe`). */
export async function brokenReceiver(kind: BrokenKind, secret: string): Promise<TestReceiver> {
  const processed: string[] = [];
  const seen = new Set<string>();
  return serve((req, res) => {
    if (kind === 'hangs') return; // never answers
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const h = req.headers;
      let ok: boolean;
      switch (kind) {
        case 'accepts-everything':
          ok = true;
          break;
        case 'skips-missing-signature':
          // "no signature header: signing must be off" — the classic hole.
          ok = h['webhook-signature'] === undefined && h['x-svc-signature'] === undefined ? true : verifyWebhook(body, h, secret);
          break;
        case 'ignores-timestamp':
          ok = verifyWebhook(body, h, secret, { toleranceSeconds: 1e12 });
          break;
        case 'github-style-only':
          ok = verifySignature(body, h['x-svc-signature'] as string | undefined, secret);
          break;
        case 'reserialises-json': {
          // What a body parser + JSON.stringify does before verification.
          let reserialised: Buffer;
          try {
            reserialised = Buffer.from(JSON.stringify(JSON.parse(body.toString('utf8'))));
          } catch {
            reserialised = body;
          }
          ok = verifyWebhook(reserialised, h, secret);
          break;
        }
        case 'no-dedupe':
          ok = verifyWebhook(body, h, secret);
          break;
        case 'small-body-limit':
          // express.raw()'s and body-parser's default limit, 100 KB.
          if (body.length > 100 * 1024) return void res.writeHead(413, { 'content-type': 'text/plain' }).end('request entity too large');
          ok = verifyWebhook(body, h, secret);
          break;
        case 'single-signature': {
          // Compares the whole header with the one signature it expects: fine until a rotation sends two.
          const id = String(h['webhook-id'] ?? '');
          const ts = Number(h['webhook-timestamp']);
          ok =
            id !== '' &&
            Number.isSafeInteger(ts) &&
            Math.abs(Date.now() / 1000 - ts) <= 300 &&
            h['webhook-signature'] === signWebhook(body, { id, timestamp: ts }, secret);
          break;
        }
      }
      if (!ok) return void res.writeHead(401, { 'content-type': 'text/plain' }).end('invalid signature');
      const id = deliveryIdOf(req);
      if (kind !== 'no-dedupe' && !dedupe(seen, id, res)) return;
      processed.push(id);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  }, processed);
}
