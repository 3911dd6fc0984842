import { useCallback, useEffect, useRef, useState } from 'react';
import type { DashboardMe } from '@svc/protocol';
import { api, setCsrfToken, setSignedOutHandler } from './api.js';
import { keepDrafts } from './drafts.js';
import { hrefOf, link, mayLeave, useRoute, useTitle, type Route } from './router.js';
import { LoginPage } from './pages/LoginPage.js';
import { KeysPage } from './pages/KeysPage.js';
import { KeySettingsPage } from './pages/KeySettingsPage.js';
import { DeliveriesPage } from './pages/DeliveriesPage.js';
import { UsagePage } from './pages/UsagePage.js';
import { ErrorMessage, ShowOnce, Spinner } from './components/Status.js';
import { hasKeptShownOnce, keepShownOnce, takeKeptShownOnce, type ShownOnceValue } from './shown-once.js';

type Session = { state: 'loading' } | { state: 'signed-out'; notice?: string } | { state: 'error'; message: string } | { state: 'signed-in'; me: DashboardMe };

const SESSION_ENDED = 'Your session has ended. Sign in again to continue.';
const SESSION_ENDED_UNSAVED = 'Your session has ended — sign in again. Your last change was not saved: make it again after signing in.';
const SESSION_ENDED_KEPT = 'Your session has ended — sign in again. Your unsaved changes were not saved, but they are kept: they are back in the form after signing in.';
const SHOWN_ONCE_KEPT = ' The new key or signing secret you had not copied is kept in this tab: it is shown again after you sign in.';

export function App() {
  const [session, setSession] = useState<Session>({ state: 'loading' });
  const route = useRoute();
  const main = useRef<HTMLElement>(null);
  // Set by a sign-in: the form (and the button that had focus) is gone, so focus goes to the page's heading.
  const headingWanted = useRef(false);
  // Whose session it is (a kept shown-once value is shown again to them only), and the values shown again.
  const userId = useRef<string | null>(null);
  const [reshown, setReshown] = useState<ShownOnceValue[]>([]);

  const load = useCallback(async () => {
    setSession({ state: 'loading' });
    try {
      const me = await api<DashboardMe>('GET', '/me');
      setCsrfToken(me.csrf_token);
      userId.current = me.user.id;
      setReshown((old) => [...old, ...takeKeptShownOnce(me.user.id)]);
      setSession({ state: 'signed-in', me });
    } catch (err) {
      const status = (err as { status?: number }).status;
      setSession(status === 401 ? { state: 'signed-out' } : { state: 'error', message: (err as Error).message });
    }
  }, []);

  const signedIn = useCallback(() => {
    headingWanted.current = true;
    void load();
  }, [load]);

  useEffect(() => {
    if (session.state === 'loading' || !headingWanted.current) return;
    headingWanted.current = false;
    if (session.state === 'signed-in' && main.current) return focusHeadingWhenShown(main.current);
  }, [session.state]);

  useEffect(() => {
    // A session that ends under an open page (signed out in another tab, expired) says so on the sign-in
    // form; the URL stays, so signing in again returns to the same page.
    setSignedOutHandler((failedWrite) => {
      // Before the sign-in form replaces the page: an open form's unsaved edit is kept for after signing in.
      const kept = keepDrafts();
      // A key or secret on screen and not copied yet: kept, not lost with the page (see shown-once.ts).
      const shownOnce = userId.current !== null && keepShownOnce(userId.current);
      setReshown([]);
      setSession((old) =>
        old.state === 'signed-in'
          ? { state: 'signed-out', notice: (kept ? SESSION_ENDED_KEPT : failedWrite ? SESSION_ENDED_UNSAVED : SESSION_ENDED) + (shownOnce ? SHOWN_ONCE_KEPT : '') }
          : old.state === 'signed-out'
            ? old
            : { state: 'signed-out' },
      );
    });
    void load();
  }, [load]);

  if (session.state === 'loading') {
    return (
      <main className="centered">
        <Spinner label="Loading the dashboard…" />
      </main>
    );
  }
  if (session.state === 'error') {
    return (
      <main className="centered">
        <div className="card narrow">
          <ErrorMessage message={session.message} onRetry={load} />
        </div>
      </main>
    );
  }
  if (session.state === 'signed-out') return <LoginPage onSignedIn={signedIn} notice={session.notice} keepsShownOnce={hasKeptShownOnce()} />;

  const signOut = async () => {
    // Unsaved edits are asked about first, as when leaving the page.
    if (!mayLeave()) return;
    try {
      await api('POST', '/logout', {});
    } finally {
      setCsrfToken('');
      setSession({ state: 'signed-out' });
    }
  };

  return (
    <div className="layout">
      <header className="topbar">
        <a className="brand" href={hrefOf({ page: 'keys' })} onClick={link({ page: 'keys' })}>
          <span className="brand-mark" aria-hidden="true">◆</span> svc
        </a>
        <nav className="nav" aria-label="Main">
          <span className="nav-group">Settings</span>
          <NavLink route={{ page: 'keys' }} current={route} label="API Keys" />
          <NavLink route={{ page: 'usage' }} current={route} label="Usage" />
        </nav>
        <div className="account">
          <span className="muted" title="Signed in">{session.me.user.email}</span>
          <button type="button" className="button ghost small" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main className="content" ref={main}>
        {reshown.map((kept) => (
          <ShowOnce
            key={kept.value}
            label={kept.label}
            value={kept.value}
            note={`Shown again after you signed in, and only here. ${kept.note}`}
            onDone={() => setReshown((old) => old.filter((v) => v !== kept))}
          />
        ))}
        <Page route={route} me={session.me} />
      </main>
    </div>
  );
}

/**
 * Focuses the first `h1` in `container` once it is there (a page shows a spinner until its data has come),
 * unless focus has gone somewhere meanwhile. Returns the clean-up.
 */
function focusHeadingWhenShown(container: HTMLElement): () => void {
  const tryFocus = (): boolean => {
    const heading = container.querySelector('h1');
    if (!heading) return false;
    if (document.activeElement && document.activeElement !== document.body) return true;
    heading.tabIndex = -1;
    heading.focus();
    return true;
  };
  if (tryFocus()) return () => {};
  const observer = new MutationObserver(() => {
    if (tryFocus()) observer.disconnect();
  });
  observer.observe(container, { childList: true, subtree: true });
  return () => observer.disconnect();
}

function Page({ route, me }: { route: Route; me: DashboardMe }) {
  switch (route.page) {
    case 'keys':
      return <KeysPage />;
    case 'key':
      return <KeySettingsPage keyId={route.keyId} me={me} />;
    case 'deliveries':
      return <DeliveriesPage route={route} />;
    case 'usage':
      return <UsagePage keyId={route.keyId} />;
    case 'not-found':
      return <NotFoundPage />;
  }
}

function NotFoundPage() {
  useTitle('Page not found');
  return (
    <section>
      <h1>Page not found</h1>
      <div className="card empty">
        <p>
          There is no dashboard page at <code>{window.location.pathname}</code>.
        </p>
        <a className="button" href={hrefOf({ page: 'keys' })} onClick={link({ page: 'keys' })}>
          Go to API Keys
        </a>
      </div>
    </section>
  );
}

function NavLink({ route, current, label }: { route: Route; current: Route; label: string }) {
  const active = route.page === 'usage' ? current.page === 'usage' : current.page !== 'usage' && current.page !== 'not-found';
  return (
    <a className={`nav-link${active ? ' active' : ''}`} href={hrefOf(route)} onClick={link(route)} aria-current={active ? 'page' : undefined}>
      {label}
    </a>
  );
}
