export * from './chat-request.js';
export * from './chat-response.js';
export * from './audit-payload.js';
export * from './errors.js';
export * from './webhooks.js';
export * from './dashboard-usage.js';
export * from './delivery-list-query.js';
export * from './dashboard.js';
