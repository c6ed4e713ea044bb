// The console's sign-in: POST /console/session trades an API key for a session cookie,
// GET /console/session says who is signed in and gives the page its CSRF token, DELETE
// signs out. The key is checked once, here; from then on the browser holds only the
// cookie (httpOnly: no script of the page can read it) and the page the token in memory.
// These routes are the console's own and stay out of /openapi.json; docs/api.md has them.
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import { CONSOLE_SESSION_TTL_MS, type ConsoleSession, csrfTokenMatches, csrfTokenOf } from '../../core/console-sessions.ts';
import { AppError } from '../../errors.ts';
import type { Services } from '../../services.ts';
import { CSRF_HEADER, sessionCookie, sessionCookieOf } from '../../http/session-cookie.ts';
import type { App } from '../../http/types.ts';

export const SESSION_PATH = '/console/session';

const SignIn = Type.Object({ api_key: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false });

function describe(session: ConsoleSession, sessionId: string) {
  return {
    organization_id: session.caller.organizationId,
    key_id: session.caller.keyId,
    env: session.caller.env,
    csrf_token: csrfTokenOf(sessionId),
    expires_at: session.expiresAt,
  };
}

export function sessionRoutes(app: App, { organizations, consoleSessions, config }: Services): void {
  const noStore = async (_request: FastifyRequest, reply: FastifyReply) => {
    reply.header('Cache-Control', 'no-store');
  };

  // Only JSON bodies are parsed, so a form another site posts cannot sign a browser in
  // with that site's key.
  app.post(SESSION_PATH, { schema: { hide: true, body: SignIn }, onRequest: noStore }, async (request, reply) => {
    const caller = await organizations.authenticate(request.body.api_key.trim());
    const session = await consoleSessions.create(caller);
    reply.header('Set-Cookie', sessionCookie(request, config.publicUrl, session.sessionId, Math.floor(CONSOLE_SESSION_TTL_MS / 1000)));
    return reply.code(201).send(describe(session, session.sessionId));
  });

  // Readable by the console's own pages only: the server sends no CORS headers, so
  // another site's script cannot read the token this answers.
  app.get(SESSION_PATH, { schema: { hide: true }, onRequest: noStore }, async (request) => {
    const sessionId = sessionCookieOf(request);
    if (sessionId === undefined) throw new AppError('missing_api_key', 'not signed in to the console: sign in with an API key (POST /console/session)');
    const session = await consoleSessions.find(sessionId);
    if (!session) throw new AppError('invalid_api_key', 'the console session is over (signed out, expired, or its API key revoked): sign in again');
    return describe(session, sessionId);
  });

  app.delete(SESSION_PATH, { schema: { hide: true }, onRequest: noStore }, async (request, reply) => {
    const sessionId = sessionCookieOf(request);
    if (sessionId !== undefined) {
      const token = request.headers[CSRF_HEADER];
      if (typeof token !== 'string' || !csrfTokenMatches(sessionId, token)) {
        throw new AppError('invalid_csrf_token', `signing out takes the session's CSRF token in the ${CSRF_HEADER} header`);
      }
      await consoleSessions.end(sessionId);
    }
    reply.header('Set-Cookie', sessionCookie(request, config.publicUrl, '', 0));
    return reply.code(204).send();
  });
}
