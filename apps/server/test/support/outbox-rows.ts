import { newDeliveryId, type NewDelivery } from '../../src/storage/outbox-store.js';

/**
 * An audit delivery of key_a to https://example.com/hooks as the outbox tests insert it: its id new unless given,
 * its request id and payload named after that id; `overrides` (the time, a lease, another payload) on top.
 */
export function testDelivery(overrides: Partial<NewDelivery> & Pick<NewDelivery, 'now'>): NewDelivery {
  const id = overrides.id ?? newDeliveryId();
  return {
    id,
    keyId: 'key_a',
    userId: '7f1c0f5e-8a43-4c55-9a0e-3f2f1a1b2c3d',
    event: 'llm.request.completed',
    requestId: `chatcmpl-${id}`,
    url: 'https://example.com/hooks',
    payload: `{"request_id":"chatcmpl-${id}"}`,
    ...overrides,
  };
}
