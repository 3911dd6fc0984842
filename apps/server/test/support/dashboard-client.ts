/** The password `startTestServer().createKey()` gives every user. */
export const PASSWORD = 'correct horse battery staple';

/** A browser-like client: keeps the session cookie, sends the CSRF token on writes unless told not to. */
export class DashboardClient {
  cookie = '';
  csrf = '';
  constructor(private readonly base: string) {}

  async request(method: string, path: string, body?: unknown, options: { csrf?: boolean } = {}) {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.cookie) headers.cookie = this.cookie;
    if (method !== 'GET' && options.csrf !== false && this.csrf) headers['x-csrf-token'] = this.csrf;
    const res = await fetch(`${this.base}/dashboard/api${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const setCookie = res.headers.get('set-cookie');
    if (setCookie) {
      const pair = setCookie.split(';')[0] ?? '';
      this.cookie = pair.endsWith('=') ? '' : pair;
    }
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as any };
  }

  async login(email: string, password = PASSWORD) {
    const res = await this.request('POST', '/login', { email, password });
    if (res.status === 200) this.csrf = res.body.csrf_token;
    return res;
  }
}

/**
 * A signed-in session for a browser: signs in through the dashboard API (as the sign-in form does) and returns
 * the session cookie in Playwright's shape, for `context.addCookies`. Pages opened with it load signed in, as
 * after a reload; the sign-in form itself has tests of its own.
 */
export async function sessionCookie(base: string, email: string, password = PASSWORD): Promise<{ name: string; value: string; url: string }> {
  const client = new DashboardClient(base);
  const res = await client.login(email, password);
  if (res.status !== 200) throw new Error(`sign-in as ${email} failed: ${res.status} ${JSON.stringify(res.body)}`);
  const eq = client.cookie.indexOf('=');
  return { name: client.cookie.slice(0, eq), value: client.cookie.slice(eq + 1), url: base };
}
