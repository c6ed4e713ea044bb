// The web console's sessions: a person signs in with an API key and the browser keeps an
// opaque session id in a cookie instead of the key. A session acts for the key it was made
// with, so it can do what that key can and no more; it ends when it is signed out, when
// CONSOLE_SESSION_TTL_MS has passed since sign-in, or as soon as its key is revoked (every
// use looks the key up again). Only the id's hash is stored. Each session has a CSRF token
// derived from its id, which the console sends in a header with every request: a page of
// another site can make the browser send the cookie, but cannot read the token.
//
// The operator signs in with the operator token instead, for a session of its own kind:
// its id has its own prefix and its own table, it reaches the operator API only (never
// an organization's), and it ends, beside the same ways, when the server's operator
// token changes (it keeps a hash of the token it was made with).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Db } from '../store/db.ts';
import type { Caller } from './orgs.ts';

/** How long a session lasts after sign-in, whatever is done with it. */
export const CONSOLE_SESSION_TTL_MS = 12 * 60 * 60 * 1000;
const SESSION_PREFIX = 'rks_';
const OPERATOR_PREFIX = 'rko_';

/** Whether a session id is one of the operator's (looked up apart from key sessions). */
export function isOperatorSession(sessionId: string): boolean {
  return sessionId.startsWith(OPERATOR_PREFIX);
}

export interface OperatorSession {
  expiresAt: string;
}

export interface NewOperatorSession extends OperatorSession {
  /** Given to the browser once, in the cookie; never stored. */
  sessionId: string;
  csrfToken: string;
}

const tokenHashOf = (token: string) => createHash('sha256').update(`roomkit operator session\0${token}`, 'utf8').digest('hex');

export interface ConsoleSession {
  caller: Caller;
  expiresAt: string;
}

export interface NewConsoleSession extends ConsoleSession {
  /** Given to the browser once, in the cookie; never stored. */
  sessionId: string;
  csrfToken: string;
}

export class ConsoleSessions {
  private readonly db: Db;

  constructor(deps: { db: Db }) {
    this.db = deps.db;
  }

  /** A new session for a caller whose key was just checked. Sessions already over are removed meanwhile. */
  async create(caller: Caller, now = Date.now()): Promise<NewConsoleSession> {
    await this.db.deleteFrom('console_sessions').where('expires_at', '<=', new Date(now).toISOString()).execute();
    const sessionId = SESSION_PREFIX + randomBytes(32).toString('base64url');
    const expiresAt = new Date(now + CONSOLE_SESSION_TTL_MS).toISOString();
    await this.db
      .insertInto('console_sessions')
      .values({
        id_hash: hashOf(sessionId),
        key_id: caller.keyId,
        organization_id: caller.organizationId,
        created_at: new Date(now).toISOString(),
        expires_at: expiresAt,
      })
      .execute();
    return { sessionId, csrfToken: csrfTokenOf(sessionId), caller, expiresAt };
  }

  /** The session of this id while it lasts and its key is not revoked; undefined otherwise. */
  async find(sessionId: string, now = Date.now()): Promise<ConsoleSession | undefined> {
    if (!sessionId.startsWith(SESSION_PREFIX)) return undefined;
    const row = await this.db
      .selectFrom('console_sessions')
      .innerJoin('api_keys', 'api_keys.id', 'console_sessions.key_id')
      .select(['console_sessions.organization_id', 'console_sessions.key_id', 'console_sessions.expires_at', 'api_keys.env', 'api_keys.revoked_at'])
      .where('console_sessions.id_hash', '=', hashOf(sessionId))
      .executeTakeFirst();
    if (!row || row.revoked_at !== null || Date.parse(row.expires_at) <= now) return undefined;
    return { caller: { organizationId: row.organization_id, keyId: row.key_id, env: row.env }, expiresAt: row.expires_at };
  }

  /** A new operator session, for the operator token just checked. Sessions already over are removed meanwhile. */
  async createOperator(token: string, now = Date.now()): Promise<NewOperatorSession> {
    await this.db.deleteFrom('operator_console_sessions').where('expires_at', '<=', new Date(now).toISOString()).execute();
    const sessionId = OPERATOR_PREFIX + randomBytes(32).toString('base64url');
    const expiresAt = new Date(now + CONSOLE_SESSION_TTL_MS).toISOString();
    await this.db
      .insertInto('operator_console_sessions')
      .values({ id_hash: hashOf(sessionId), token_hash: tokenHashOf(token), created_at: new Date(now).toISOString(), expires_at: expiresAt })
      .execute();
    return { sessionId, csrfToken: csrfTokenOf(sessionId), expiresAt };
  }

  /** The operator session of this id while it lasts and was made with `token` (the server's operator token now); undefined otherwise. */
  async findOperator(sessionId: string, token: string | undefined, now = Date.now()): Promise<OperatorSession | undefined> {
    if (!isOperatorSession(sessionId) || token === undefined) return undefined;
    const row = await this.db
      .selectFrom('operator_console_sessions')
      .select(['token_hash', 'expires_at'])
      .where('id_hash', '=', hashOf(sessionId))
      .executeTakeFirst();
    if (!row || row.token_hash !== tokenHashOf(token) || Date.parse(row.expires_at) <= now) return undefined;
    return { expiresAt: row.expires_at };
  }

  /** Ends a session (signing out), of a key or of the operator; ending one that is already over does nothing. */
  async end(sessionId: string): Promise<void> {
    const table = isOperatorSession(sessionId) ? 'operator_console_sessions' : 'console_sessions';
    await this.db.deleteFrom(table).where('id_hash', '=', hashOf(sessionId)).execute();
  }
}

/** The CSRF token of a session: derived from its id, so it needs no storage, and says nothing of the id. */
export function csrfTokenOf(sessionId: string): string {
  return createHash('sha256').update(`roomkit console csrf\0${sessionId}`, 'utf8').digest('base64url');
}

/** Whether a presented CSRF token is the session's, compared without leaking where they differ. */
export function csrfTokenMatches(sessionId: string, presented: string): boolean {
  const want = Buffer.from(csrfTokenOf(sessionId));
  const got = Buffer.from(presented);
  return want.length === got.length && timingSafeEqual(want, got);
}

function hashOf(sessionId: string): string {
  return createHash('sha256').update(sessionId, 'utf8').digest('hex');
}
