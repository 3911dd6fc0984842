// No zod here: this module is also the `@svc/protocol/audit-event` entry, which the CLI loads without the schemas.
/** The event name of every audit webhook (`event` in the payload, `X-Svc-Event` header). */
export const AUDIT_EVENT = 'llm.request.completed';
