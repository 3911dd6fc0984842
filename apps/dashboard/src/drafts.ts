/**
 * Unsaved edits of the webhook settings form, kept when the session ends under it (expired, signed out in
 * another tab) so that they are back in the form after signing in, instead of lost with the page the sign-in
 * form replaces. Kept in this tab's sessionStorage, for the user who made them, and read once.
 */
export interface WebhookDraft {
  url: string;
  rpm: string;
  overlap: string;
}

const PREFIX = 'svc.dashboard.unsaved-webhook-settings.';
/** The open forms: key id → who edits it and their unsaved edit now (null: nothing unsaved). */
const open = new Map<string, { userId: string; read: () => WebhookDraft | null }>();

/** Registers an open form; returns the clean-up. */
export function trackDraft(keyId: string, userId: string, read: () => WebhookDraft | null): () => void {
  const entry = { userId, read };
  open.set(keyId, entry);
  return () => {
    if (open.get(keyId) === entry) open.delete(keyId);
  };
}

/** The session ended: keeps every open form's unsaved edit. True when there was one. */
export function keepDrafts(): boolean {
  let kept = false;
  for (const [keyId, { userId, read }] of open) {
    const draft = read();
    if (!draft) continue;
    try {
      sessionStorage.setItem(PREFIX + keyId, JSON.stringify({ userId, draft }));
      kept = true;
    } catch {
      // Storage off or full: the sign-in form then says the change was not saved.
    }
  }
  return kept;
}

/** The edit kept for this key and user, if any (`forgetDraft` once it is in the form). */
export function peekDraft(keyId: string, userId: string): WebhookDraft | null {
  try {
    const raw = sessionStorage.getItem(PREFIX + keyId);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as { userId?: unknown; draft?: Partial<WebhookDraft> };
    const d = parsed.draft;
    if (parsed.userId !== userId || !d || typeof d.url !== 'string' || typeof d.rpm !== 'string' || typeof d.overlap !== 'string') return null;
    return { url: d.url, rpm: d.rpm, overlap: d.overlap };
  } catch {
    return null;
  }
}

export function forgetDraft(keyId: string): void {
  try {
    sessionStorage.removeItem(PREFIX + keyId);
  } catch {
    // Nothing was kept.
  }
}
