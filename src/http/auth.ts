// Bearer-key authentication for every route under /api/ and for /mcp. The app attaches
// this hook to each such route as it is registered, so a route cannot be added without it.
import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError } from '../errors.ts';
import type { Caller, Organizations } from '../core/orgs.ts';

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller | null;
  }
}

/** Whether a route (or request URL) needs an API key: the API under /api/, and the MCP endpoint. */
export function requiresAuth(url: string): boolean {
  return url === '/api' || url.startsWith('/api/') || /^\/mcp(?:[/?]|$)/.test(url);
}

export function authenticate(organizations: Organizations): onRequestHookHandler {
  return async (request) => {
    const header = request.headers.authorization;
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

/** The authenticated caller of an /api/ request. */
export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Error(`route ${request.routeOptions.url} ran without authentication`);
  return request.caller;
}
