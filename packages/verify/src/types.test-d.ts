import { describe, expectTypeOf, it } from 'vitest';
import type { Request as ExpressRequest } from 'express';
import type { FastifyRequest } from 'fastify';
import * as node from './index.js';
import * as web from './web.js';
import { verifyRequest } from './fetch.js';
import './express.js';
import './fastify.js';

describe('public types', () => {
  it('node build is synchronous, web build asynchronous, both typed', () => {
    expectTypeOf(node.verifySignature).returns.toEqualTypeOf<boolean>();
    expectTypeOf(node.sign).returns.toEqualTypeOf<string>();
    expectTypeOf(node.constructEvent).returns.toEqualTypeOf<node.AuditPayload>();
    expectTypeOf(web.verifySignature).returns.toEqualTypeOf<Promise<boolean>>();
    expectTypeOf(web.sign).returns.toEqualTypeOf<Promise<string>>();
    expectTypeOf(web.constructEvent).returns.toEqualTypeOf<Promise<web.AuditPayload>>();
    expectTypeOf(verifyRequest).returns.toEqualTypeOf<Promise<node.AuditPayload>>();
  });

  it('accepts every raw body type and rotation lists', () => {
    expectTypeOf(node.verifySignature).parameter(0).toEqualTypeOf<string | Uint8Array | ArrayBuffer>();
    expectTypeOf(node.verifySignature).parameter(1).toEqualTypeOf<string | null | undefined>();
    expectTypeOf(node.verifySignature).parameter(2).toEqualTypeOf<string | readonly string[]>();
  });

  it('rejects misuse at compile time', () => {
    // @ts-expect-error -- a parsed body cannot be verified.
    node.verifySignature({ event: 'llm.request.completed' }, 'sha256=', 'whsec_x');
    // @ts-expect-error -- the secret is required.
    node.verifySignature('{}', 'sha256=');
    // @ts-expect-error -- signing takes exactly one secret.
    node.sign('{}', ['a', 'b']);
    // @ts-expect-error -- toleranceSeconds is a number.
    node.constructEvent('{}', 'sha256=', 'whsec_x', { toleranceSeconds: '300' });
  });

  it('types the payload fields and the error codes', () => {
    expectTypeOf<node.AuditPayload['event']>().toEqualTypeOf<'llm.request.completed'>();
    expectTypeOf<node.AuditPayload['test']>().toEqualTypeOf<boolean | undefined>();
    expectTypeOf<node.AuditPayload['refusal']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<node.AuditPayload['unreadable_parts']>().toEqualTypeOf<Array<{ message_index: number; type: string }> | undefined>();
    expectTypeOf<node.WebhookVerificationError['code']>().toEqualTypeOf<
      'missing_signature' | 'malformed_signature' | 'signature_mismatch' | 'invalid_payload' | 'timestamp_out_of_range' | 'payload_too_large'
    >();
  });

  it('adds svcEvent to Express and Fastify requests', () => {
    expectTypeOf<ExpressRequest['svcEvent']>().toEqualTypeOf<node.AuditPayload | undefined>();
    expectTypeOf<FastifyRequest['svcEvent']>().toEqualTypeOf<node.AuditPayload | undefined>();
  });
});
