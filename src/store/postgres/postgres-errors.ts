// What went wrong when the store could not open its PostgreSQL database, said as what to
// fix: the server is not reachable, refused the login, or has no such database. The
// message names the server and database of ROOMKIT_DATABASE_URL, never its password.

/** SQLSTATEs and system error codes of a connection that could not be made. */
const LOGIN_REFUSED = new Set(['28P01', '28000']);
const NO_DATABASE = '3D000';
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/** host:port/database of a PostgreSQL URL, without user or password. */
export function describeDatabase(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname === '' ? '/' : parsed.pathname}`;
  } catch {
    return 'the server of ROOMKIT_DATABASE_URL';
  }
}

function userOf(url: string): string {
  try {
    return decodeURIComponent(new URL(url).username) || 'the default user';
  } catch {
    return 'the user';
  }
}

/**
 * The error to report for `err`, raised while connecting to `url`: one that says what to
 * fix when the connection itself failed, or null when `err` is about something else.
 */
export function connectionError(err: unknown, url: string): Error | null {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  const where = describeDatabase(url);
  if (typeof code === 'string' && UNREACHABLE.has(code)) {
    return new Error(`cannot reach PostgreSQL at ${where} (${code}): check the host and port of ROOMKIT_DATABASE_URL and that the server is running and accepts connections from this host`);
  }
  if (/timeout exceeded when trying to connect|Connection terminated due to connection timeout/i.test(message)) {
    return new Error(`PostgreSQL at ${where} did not answer in time: check the host and port of ROOMKIT_DATABASE_URL and the network between them`);
  }
  if (typeof code === 'string' && LOGIN_REFUSED.has(code)) {
    return new Error(`PostgreSQL at ${where} refused the login of ${userOf(url)}: check the user and password in ROOMKIT_DATABASE_URL (and pg_hba.conf) (${message})`);
  }
  if (code === NO_DATABASE) {
    return new Error(`PostgreSQL at ${where} has no such database: create it (createdb, or CREATE DATABASE) or fix the name in ROOMKIT_DATABASE_URL`);
  }
  if (err instanceof TypeError && /Invalid URL|port/i.test(message)) {
    return new Error(`ROOMKIT_DATABASE_URL is not a PostgreSQL URL this client can use (${message}): write it as postgres://user:password@host:5432/database`);
  }
  return null;
}
