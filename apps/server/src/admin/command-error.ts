/** A user-facing failure of an admin command: printed as one line, exit 1, no stack trace. */
export class CommandError extends Error {}
