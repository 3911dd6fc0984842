import type { BulkRedeliverResult, ChatCompletion, Delivery, DeliveryDetail, DeliveryList, WebhookTestResult } from '@svc/protocol';

/**
 * What a command expects the server to answer, checked before any field is read: a 2xx JSON body from something
 * that is not svc (another API on the port, a mock, a proxy's catch-all) is then one line naming it, not
 * `Cannot read properties of undefined`. Only the fields the CLI reads are checked (the CLI does not load zod).
 */
export interface ResponseShape<T> {
  /** `a delivery list`: what the answer is not, in the error message. */
  what: string;
  check(value: unknown): value is T;
}

type Fields = Record<string, unknown>;

const isObject = (value: unknown): value is Fields => typeof value === 'object' && value !== null && !Array.isArray(value);
const isString = (value: unknown): value is string => typeof value === 'string';
const isNumber = (value: unknown): value is number => typeof value === 'number';

function isDelivery(value: unknown): value is Delivery {
  return isObject(value) && isString(value.id) && isString(value.status) && isString(value.request_id) && isString(value.created_at) && isNumber(value.attempts);
}

/** The answer to redeliver or cancel: the delivery as it now is (the CLI prints its id, status and url when there). */
export const deliveryActionResult: ResponseShape<Partial<Delivery>> = {
  what: 'a delivery',
  check: (value): value is Partial<Delivery> =>
    isObject(value) && ['id', 'status', 'url'].every((name) => value[name] === undefined || isString(value[name])),
};

export const deliveryList: ResponseShape<DeliveryList> = {
  what: 'a delivery list',
  check: (value): value is DeliveryList => isObject(value) && Array.isArray(value.data) && value.data.every(isDelivery),
};

export const deliveryDetail: ResponseShape<DeliveryDetail> = {
  what: 'a delivery',
  check: (value): value is DeliveryDetail =>
    isDelivery(value) && isString((value as Fields).payload) && ((value as Fields).attempt_log === undefined || Array.isArray((value as Fields).attempt_log)),
};

export const webhookTestResult: ResponseShape<WebhookTestResult> = {
  what: 'a test delivery result',
  check: (value): value is WebhookTestResult => isObject(value) && typeof value.success === 'boolean' && isString(value.delivered_to),
};

export const bulkRedeliverResult: ResponseShape<BulkRedeliverResult> = {
  what: 'a redelivery result',
  check: (value): value is BulkRedeliverResult => isObject(value) && isNumber(value.matched) && isNumber(value.redelivered) && isNumber(value.limit),
};

export const chatCompletion: ResponseShape<ChatCompletion> = {
  what: 'a chat completion',
  check: (value): value is ChatCompletion => isObject(value) && Array.isArray(value.choices),
};
