import { CONNECT_TIMEOUT_MS, QueryWaitError } from './postgres-pool.js';

/**
 * What an operator should know about a database error that is a fault of the database's surroundings (a full
 * disk, a read-only file system, a lock another session holds, Postgres restarting or out of connections), or
 * undefined for anything else (a bug, a constraint). Such a fault is expected in operation: requests that meet it
 * are answered 503 `database_unavailable` and logged with this sentence instead of a stack trace, and svc carries
 * on once the cause is gone.
 *
 * @example
 * storageFault(sqliteError); // 'SQLITE_FULL: the disk holding the database file is full …'
 */
export function storageFault(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, message } = err as { code?: unknown; message?: unknown };
  const text = typeof message === 'string' ? message : '';
  if (typeof code === 'string' && code.startsWith('SQLITE_')) return sqliteFault(code, text);
  // pg's own errors when a connection ends or cannot open: no SQLSTATE, a Node code or only a message. Before the
  // SQLSTATE test: EPIPE has a SQLSTATE's shape (five capitals).
  if (typeof code === 'string' && /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE|ENOTFOUND|EAI_AGAIN)$/.test(code)) {
    return `${code}: Postgres cannot be reached (${text}); svc serves again once it is back`;
  }
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return postgresFault(code, text);
  if (err instanceof QueryWaitError) {
    return `${text}: the network to it drops packets (a partition, or a failover that left SVC_DATABASE_URL's address unanswered) or it is stalled; the connection was closed and the next query opens a new one; svc serves again once Postgres answers`;
  }
  if (text === 'Connection terminated due to connection timeout') {
    return `Postgres did not accept a connection within ${CONNECT_TIMEOUT_MS / 1000} s: the network to it drops packets or it is stalled; svc serves again once it is back`;
  }
  if (text === 'timeout exceeded when trying to connect') {
    return `no Postgres connection of the pool came free within ${CONNECT_TIMEOUT_MS / 1000} s: Postgres answers slowly or not at all, or SVC_DATABASE_POOL_SIZE is small for the load`;
  }
  if (/^Connection terminated/.test(text)) {
    return `Postgres connection lost: ${text}; svc serves again once it is back`;
  }
  return undefined;
}

function sqliteFault(code: string, message: string): string | undefined {
  if (code === 'SQLITE_FULL') {
    return `${code}: the disk holding the database file is full (${message}); free space on it and writes resume, without a restart`;
  }
  if (code.startsWith('SQLITE_READONLY')) {
    return `${code}: the database file takes no writes (${message}): a file system mounted or remounted read-only, or the file's or its directory's permissions; writes resume once it is writable`;
  }
  if (code.startsWith('SQLITE_IOERR')) return `${code}: the disk failed a read or write of the database file (${message}); check the disk and the kernel log`;
  if (code.startsWith('SQLITE_BUSY')) return `${code}: another process held the database file's write lock past the 5 s busy timeout (${message})`;
  if (code.startsWith('SQLITE_CANTOPEN')) return `${code}: the database file cannot be opened (${message})`;
  return undefined;
}

function postgresFault(sqlState: string, message: string): string | undefined {
  switch (sqlState) {
    case '55P03':
      return `Postgres ${sqlState}: a statement waited past lock_timeout for a lock another session holds (${message}): an operator's LOCK TABLE, ALTER TABLE, VACUUM FULL or open transaction; pg_locks and pg_stat_activity name it`;
    case '57014':
      return `Postgres ${sqlState}: a statement was cancelled (${message}): statement_timeout, or pg_cancel_backend`;
    case '53300':
    case '53400':
      return `Postgres ${sqlState}: Postgres refused a connection (${message}): a connection limit is reached (max_connections, or the role's or database's CONNECTION LIMIT); raise it, or lower SVC_DATABASE_POOL_SIZE (connections per svc process, default 20)`;
    case '53100':
      return `Postgres ${sqlState}: the disk of the Postgres server is full (${message})`;
    case '25006':
      return `Postgres ${sqlState}: Postgres takes no writes (${message}): SVC_DATABASE_URL reaches a standby (after a failover?) or default_transaction_read_only is on`;
    case '57P01':
    case '57P02':
    case '57P03':
      return `Postgres ${sqlState}: Postgres is shutting down, restarting or not yet accepting connections (${message}); svc serves again once it is back`;
  }
  // Class 08: connection exceptions.
  if (sqlState.startsWith('08')) return `Postgres ${sqlState}: the connection failed (${message}); svc serves again once it is back`;
  return undefined;
}

/**
 * Whether `err` says the database connection a statement was sent on is gone — Postgres ended it
 * (`pg_terminate_backend`, a restart: 57P01/57P02), the network reset it, or pg found it closed — while Postgres
 * itself may be well: a statement sent again goes out on another connection of the pool. Not for a timeout or a
 * refused connection, where another try would wait or fail again.
 *
 * @example
 * connectionLost(new Error('Connection terminated unexpectedly')); // true
 */
export function connectionLost(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (code === '57P01' || code === '57P02' || code === 'ECONNRESET' || code === 'EPIPE') return true;
  if (typeof code === 'string' && /^08[0-9A-Z]{3}$/.test(code)) return true;
  return typeof message === 'string' && /^Connection terminated unexpectedly|^Client has encountered a connection error and is not queryable/.test(message);
}


/**
 * `statement`, sent once more when the connection it went out on was lost (`connectionLost`). Only for a statement
 * that may run twice — a read, or a write that sets what it sets whatever ran before — since a lost connection may
 * have lost only the answer. A request that met an operator's `pg_terminate_backend` or a proxy's reset is then
 * answered rather than 503; a second loss is the caller's.
 *
 * @example
 * const key = await onceMoreIfConnectionLost(() => keys.byHash(hash));
 */
export async function onceMoreIfConnectionLost<T>(statement: () => Promise<T>): Promise<T> {
  try {
    return await statement();
  } catch (err) {
    if (!connectionLost(err)) throw err;
    await nextTurn();
    return statement();
  }
}

/**
 * `write` (one transaction), sent again, up to `tries` times in all, when the connection it went out on was lost
 * (Postgres ended it: `pg_terminate_backend`, a failover, a proxy's reset). Before each try but the first, `landed`
 * says whether the commit had landed and only its answer was lost: then nothing is written twice, and the answer is
 * undefined.
 */
export async function writeAgainIfConnectionLost<T>(tries: number, write: () => Promise<T>, landed: () => Promise<boolean>): Promise<T | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      if (attempt > 1 && (await landed())) return undefined;
      return await write();
    } catch (err) {
      if (!connectionLost(err) || attempt >= tries) throw err;
      await nextTurn();
    }
  }
}

/**
 * A turn of the event loop before a statement is sent again: connections ended all at once (pg_terminate_backend
 * of every one of svc's) are seen closed by the pool only as their sockets are read, and until then the pool would
 * hand out another dead one.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
