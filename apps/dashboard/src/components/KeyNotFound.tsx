import { hrefOf, link } from '../router.js';

/** A key page opened with an id that is no key of this account (unknown, or another account's: alike). */
export function KeyNotFound() {
  return (
    <div className="card empty" data-testid="key-not-found">
      <p>This key does not exist or belongs to another account.</p>
      <a className="button" href={hrefOf({ page: 'keys' })} onClick={link({ page: 'keys' })}>
        Back to API Keys
      </a>
    </div>
  );
}
