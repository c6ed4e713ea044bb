// The console's sign-in: POST /console/session trades an API key for a session cookie,
// GET /console/session says who is signed in and gives the page its CSRF token, DELETE
// signs out. The key is checked once, here; from then on the browser holds only the
// cookie (httpOnly: no script of the page can read it) and the page the token in memory.
// These routes are the console's own and stay out of /openapi.json; docs/api.md has them.
// A sign-in is an authentication like any other: a rejected key counts against the
// client's address in the API's auth throttle, which then refuses its sign-ins too; and
// signing in and out are in the organization's audit trail. The operator signs in the same
// way with the operator token (ROOMKIT_OPERATOR_TOKEN), for a session that reaches the
// operator API only; its sign-ins are logged (they belong to no organization's trail).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import type { AuditAction } from '../../core/audit-schema.ts';
import { CONSOLE_SESSION_TTL_MS, type ConsoleSession, csrfTokenMatches, csrfTokenOf, isOperatorSession, type OperatorSession } from '../../core/console-sessions.ts';
import type { Caller } from '../../core/orgs.ts';
import { AppError } from '../../errors.ts';
import type { Services } from '../../services.ts';
import type { AuthThrottle } from '../../http/auth-throttle.ts';
import { CSRF_HEADER, sessionCookie, sessionCookieOf } from '../../http/session-cookie.ts';
import type { App } from '../../http/types.ts';
import { timeOrderedUuid } from '../../lib/ids.ts';

export const SESSION_PATH = '/console/session';

const SignIn = Type.Object(
  {
    api_key: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    operator_token: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  },
  { additionalProperties: false },
);

const digest = (value: string) => createHash('sha256').update(value).digest();

function describe(session: ConsoleSession, sessionId: string) {
  return {
    kind: 'key' as const,
    organization_id: session.caller.organizationId,
    key_id: session.caller.keyId,
    env: session.caller.env,
    csrf_token: csrfTokenOf(sessionId),
    expires_at: session.expiresAt,
  };
}

function describeOperator(session: OperatorSession, sessionId: string) {
  return { kind: 'operator' as const, organization_id: null, key_id: null, env: null, csrf_token: csrfTokenOf(sessionId), expires_at: session.expiresAt };
}

export function sessionRoutes(app: App, { organizations, consoleSessions, config, audit, log }: Services, throttle?: AuthThrottle): void {
  /** The audit record of a sign-in or sign-out, which the API's audit hook does not see (it is not under /api/). */
  const record = (request: FastifyRequest, action: AuditAction, caller: Caller, startedAt: number, status: number) => {
    audit.record({
      eventId: timeOrderedUuid(startedAt),
      organizationId: caller.organizationId,
      at: new Date(startedAt).toISOString(),
      durationMs: Date.now() - startedAt,
      requestId: request.id,
      keyId: caller.keyId,
      clientAddress: request.ip,
      via: 'api',
      method: request.method,
      route: SESSION_PATH,
      action,
      status,
      decision: 'allowed',
    });
  };
  const noStore = async (_request: FastifyRequest, reply: FastifyReply) => {
    reply.header('Cache-Control', 'no-store');
  };

  // Only JSON bodies are parsed, so a form another site posts cannot sign a browser in
  // with that site's key.
  app.post(SESSION_PATH, { schema: { hide: true, body: SignIn }, onRequest: noStore }, async (request, reply) => {
    const startedAt = Date.now();
    const { api_key: apiKey, operator_token: operatorToken } = request.body;
    if ((apiKey === undefined) === (operatorToken === undefined)) {
      const message = 'sign in with one of api_key (an API key of an organization) or operator_token (the operator token)';
      throw new AppError('validation_error', message, { errors: [{ field: 'api_key', message }] });
    }
    throttle?.check(request);
    if (operatorToken !== undefined) {
      const expected = config.operatorToken;
      if (expected === undefined || !timingSafeEqual(digest(operatorToken.trim()), digest(expected))) {
        throttle?.failed(request);
        throw new AppError(
          'invalid_operator_token',
          expected === undefined ? 'this server has no operator token (ROOMKIT_OPERATOR_TOKEN): there is no operator to sign in as' : 'that is not the operator token (ROOMKIT_OPERATOR_TOKEN)',
        );
      }
      const session = await consoleSessions.createOperator(expected);
      log.info({ clientAddress: request.ip }, 'the operator signed in to the console');
      reply.header('Set-Cookie', sessionCookie(request, config.publicUrl, session.sessionId, Math.floor(CONSOLE_SESSION_TTL_MS / 1000)));
      return reply.code(201).send(describeOperator(session, session.sessionId));
    }
    let caller: Caller;
    try {
      caller = await organizations.authenticate((apiKey as string).trim());
    } catch (err) {
      if (err instanceof AppError && err.code === 'invalid_api_key') throttle?.failed(request);
      throw err;
    }
    const session = await consoleSessions.create(caller);
    record(request, 'console.sign_in', caller, startedAt, 201);
    reply.header('Set-Cookie', sessionCookie(request, config.publicUrl, session.sessionId, Math.floor(CONSOLE_SESSION_TTL_MS / 1000)));
    return reply.code(201).send(describe(session, session.sessionId));
  });

  // Readable by the console's own pages only: the server sends no CORS headers, so
  // another site's script cannot read the token this answers.
  app.get(SESSION_PATH, { schema: { hide: true }, onRequest: noStore }, async (request) => {
    const sessionId = sessionCookieOf(request);
    if (sessionId === undefined) throw new AppError('missing_api_key', 'not signed in to the console: sign in with an API key (POST /console/session)');
    if (isOperatorSession(sessionId)) {
      const operator = await consoleSessions.findOperator(sessionId, config.operatorToken);
      if (!operator) throw new AppError('invalid_operator_token', 'the operator\'s console session is over (signed out, expired, or the operator token changed): sign in again');
      return describeOperator(operator, sessionId);
    }
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
      const startedAt = Date.now();
      const ended = isOperatorSession(sessionId) ? undefined : await consoleSessions.find(sessionId);
      await consoleSessions.end(sessionId);
      if (ended) record(request, 'console.sign_out', ended.caller, startedAt, 204);
    }
    reply.header('Set-Cookie', sessionCookie(request, config.publicUrl, '', 0));
    return reply.code(204).send();
  });
}
