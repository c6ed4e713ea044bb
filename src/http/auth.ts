// Bearer-key authentication for every route under /api/ and for /mcp. The app attaches
// this hook to each such route as it is registered, so a route cannot be added without it.
// A route whose config has `ticketAuth` also takes, instead of the header, a terminal
// ticket in its `ticket` query parameter (browsers cannot set headers on a WebSocket).
// A request without the header may carry the web console's session cookie instead, which
// counts only beside the session's CSRF token (session-cookie.ts).
import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError } from '../errors.ts';
import type { Caller, Organizations } from '../core/orgs.ts';
import type { TerminalTickets } from '../core/terminal-tickets.ts';
import { type ConsoleSessions, csrfTokenMatches } from '../core/console-sessions.ts';
import { CSRF_HEADER, sessionCookieOf } from './session-cookie.ts';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
  interface FastifyContextConfig {
    /** The route also accepts a terminal ticket (`?ticket=`) in place of the Authorization header. */
    ticketAuth?: boolean;
  }
}

/**
 * Whether a route (or request URL) needs credentials: the API under /api/, the MCP
 * endpoint, and the E2B adapter under /e2b/ (which takes them in E2B's headers: the app
 * attaches that adapter's own hook to its routes).
 */
export function requiresAuth(url: string): boolean {
  return url === '/api' || url.startsWith('/api/') || /^\/(?:mcp|e2b)(?:[/?]|$)/.test(url);
}

export function authenticate(organizations: Organizations, tickets: TerminalTickets, sessions: ConsoleSessions): onRequestHookHandler {
  return async (request) => {
    const header = request.headers.authorization;
    const ticket = (request.query as Record<string, unknown> | undefined)?.ticket;
    if (request.routeOptions.config.ticketAuth === true && typeof ticket === 'string' && (header === undefined || header.trim() === '')) {
      const params = request.params as { profile_id?: string; room_id?: string };
      const caller = tickets.redeem(ticket, params.profile_id ?? '', params.room_id ?? '');
      if (!(await organizations.keyIsActive(caller))) {
        throw new AppError('invalid_api_key', 'the API key that made this terminal ticket has been revoked');
      }
      request.caller = caller;
      request.log = request.log.child({ organizationId: caller.organizationId, keyId: caller.keyId });
      return;
    }
    const session = header === undefined || header.trim() === '' ? sessionCookieOf(request) : undefined;
    if (session !== undefined) {
      request.caller = await consoleCaller(sessions, session, request.headers[CSRF_HEADER]);
      request.log = request.log.child({ organizationId: request.caller.organizationId, keyId: request.caller.keyId });
      return;
    }
    if (header === undefined || header.trim() === '') {
      throw new AppError(
        'missing_api_key',
        'this endpoint needs an API key: send the header "Authorization: Bearer rk_live_..." (see `roomkit keys create`)',
      );
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match?.[1]) {
      throw new AppError('invalid_api_key', 'the Authorization header must be "Bearer <API key>"');
    }
    request.caller = await organizations.authenticate(match[1]);
    request.log = request.log.child({ organizationId: request.caller.organizationId, keyId: request.caller.keyId });
  };
}

/**
 * The caller of a console session. Its CSRF token is checked first: a request another
 * site made the browser send carries the cookie but never the token.
 */
async function consoleCaller(sessions: ConsoleSessions, sessionId: string, token: string | string[] | undefined): Promise<Caller> {
  if (typeof token !== 'string' || !csrfTokenMatches(sessionId, token)) {
    throw new AppError(
      'invalid_csrf_token',
      `a request with the console's session cookie must carry the session's CSRF token in the ${CSRF_HEADER} header (GET /console/session answers it)`,
    );
  }
  const found = await sessions.find(sessionId);
  if (!found) {
    throw new AppError('invalid_api_key', 'the console session is over (signed out, expired, or its API key revoked): sign in again');
  }
  return found.caller;
}

/** The authenticated caller of an /api/ request. */
export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Error(`route ${request.routeOptions.url} ran without authentication`);
  return request.caller;
}
