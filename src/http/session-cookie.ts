// The web console's session on the wire: the cookie that carries its id and the header
// that carries its CSRF token. The auth hook (auth.ts) accepts the cookie in place of a
// key only beside the token; the console adapter sets and clears the cookie.
import type { FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'roomkit_session';
export const CSRF_HEADER = 'x-roomkit-csrf';

/** The session id in a request's cookies, if it carries one. */
export function sessionCookieOf(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return value === '' ? undefined : value;
    }
  }
  return undefined;
}

/**
 * The Set-Cookie value that keeps a session in the browser (or, with maxAgeS 0, removes
 * it): never readable by scripts, never sent by a request another site starts, and only
 * over TLS when the console is served over https: the request came so (through a trusted
 * proxy that says it), or the service's public URL is https.
 */
export function sessionCookie(request: FastifyRequest, publicUrl: string | undefined, value: string, maxAgeS: number): string {
  const secure = request.protocol === 'https' || publicUrl?.startsWith('https:') === true ? '; Secure' : '';
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeS}; HttpOnly; SameSite=Strict${secure}`;
}
