/**
 * Values shown once (a new API key, a generated signing secret) that are on screen and not yet copied. When the
 * session ends under them, the sign-in form replaces the page and they would be gone for good — the server keeps
 * only a hash of a key and never shows a secret again. So they are kept in this tab's memory (never in storage)
 * for the user they were made for, and shown again once that user has signed in again: a reveal behind
 * re-authentication. Anyone else signing in in this tab drops them.
 */
export interface ShownOnceValue {
  label: string;
  value: string;
  note: string;
}

/** Displayed and not copied yet: each reads its value. */
const open = new Set<() => ShownOnceValue>();
let kept: { userId: string; values: ShownOnceValue[] } | null = null;

/** Registers a displayed value that has not been copied; returns the clean-up (copied, closed, gone). */
export function trackShownOnce(read: () => ShownOnceValue): () => void {
  open.add(read);
  return () => {
    open.delete(read);
  };
}

/** The session of `userId` ended: keeps every value on screen that was not copied. True when there was one. */
export function keepShownOnce(userId: string): boolean {
  const before = kept?.userId === userId ? kept.values : [];
  // Several requests may find the session gone before the page goes: each value is kept once.
  const values = [...open].map((read) => read()).filter((v) => !before.some((k) => k.value === v.value));
  if (values.length > 0) kept = { userId, values: [...before, ...values] };
  return kept !== null;
}

/** Whether a value waits for its user to sign in again (leaving the tab would lose it). */
export function hasKeptShownOnce(): boolean {
  return kept !== null;
}

/** After signing in: the values kept for this user, once; another user's are dropped. */
export function takeKeptShownOnce(userId: string): ShownOnceValue[] {
  const mine = kept?.userId === userId ? kept.values : [];
  kept = null;
  return mine;
}
