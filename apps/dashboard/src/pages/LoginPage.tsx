import { useEffect, useRef, useState, type FormEvent } from 'react';
import type { DashboardSignIn } from '@svc/protocol';
import { api, ApiError, setCsrfToken } from '../api.js';
import { useTitle } from '../router.js';

/**
 * `notice`: why the form is shown instead of the page that was open (the session ended). `keepsShownOnce`: a key
 * or secret not copied yet waits in this tab for the sign-in, so leaving the tab asks first.
 */
export function LoginPage({ onSignedIn, notice, keepsShownOnce = false }: { onSignedIn: () => void; notice?: string; keepsShownOnce?: boolean }) {
  useTitle('Sign in');
  useEffect(() => {
    if (!keepsShownOnce) return;
    const beforeUnload = (event: BeforeUnloadEvent) => {
      event.preventDefault();
      event.returnValue = '';
    };
    window.addEventListener('beforeunload', beforeUnload);
    return () => window.removeEventListener('beforeunload', beforeUnload);
  }, [keepsShownOnce]);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<{ message: string; param: string | null } | null>(null);
  const errorMessage = useRef<HTMLDivElement>(null);
  // A refusal (wrong password, the 429 lockout) takes focus, so it is read out and the next Tab is the form's.
  useEffect(() => errorMessage.current?.focus(), [error]);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const res = await api<DashboardSignIn>('POST', '/login', { email, password });
      setCsrfToken(res.csrf_token);
      onSignedIn();
    } catch (err) {
      setError({ message: (err as Error).message, param: err instanceof ApiError ? err.param : null });
      setBusy(false);
    }
  };

  return (
    <main className="centered">
      <form className="card narrow login" onSubmit={submit} noValidate>
        <div className="brand big">
          <span className="brand-mark" aria-hidden="true">◆</span> svc
        </div>
        <h1>Sign in</h1>
        <p className="muted">Manage API keys, audit webhooks and usage.</p>
        {notice && (
          <div className="alert warn" role="status" data-testid="session-ended">
            {notice}
          </div>
        )}
        <label className="field">
          <span>Email</span>
          <input type="email" name="email" autoComplete="username" value={email} onChange={(e) => setEmail(e.target.value)} required autoFocus />
        </label>
        <label className="field">
          <span>Password</span>
          <input type="password" name="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} required />
        </label>
        {error && (
          <div ref={errorMessage} className="alert error" role="alert" tabIndex={-1}>
            {error.message}
          </div>
        )}
        {/* aria-disabled, not disabled: a disabled button loses focus to the page body while it works. */}
        <button type="submit" className="button primary wide" aria-disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p className="hint">
          First run? <code>svc-server start</code> printed the email and password of the local user once (on Postgres,
          make a user with <code>svc-server users create</code>).
        </p>
      </form>
    </main>
  );
}
