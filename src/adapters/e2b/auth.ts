// Who calls the E2B adapter. The control API takes a roomkit API key in X-API-KEY (the
// header E2B's SDK sends E2B_API_KEY in); the in-sandbox calls take the sandbox's access
// token in X-Access-Token and name the sandbox in E2b-Sandbox-Id, as the SDK sends them
// to E2B_SANDBOX_URL. The app attaches this hook to every route under the adapter's
// prefix as it is registered, before the API rate limits, so none goes without it.
import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Organizations } from '../../core/orgs.ts';
import { AppError } from '../../errors.ts';
import type { AccessTokens } from './access-tokens.ts';

/** Where the adapter is mounted: E2B_API_URL is the server's address with this path. */
export const E2B_PREFIX = '/e2b';
/** Where the in-sandbox protocol is served: E2B_SANDBOX_URL is the server's address with this path. */
export const ENVD_PREFIX = `${E2B_PREFIX}/envd`;

export function isE2bUrl(url: string): boolean {
  return url === E2B_PREFIX || url.startsWith(`${E2B_PREFIX}/`);
}

export function isEnvdUrl(url: string): boolean {
  return url === ENVD_PREFIX || url.startsWith(`${ENVD_PREFIX}/`);
}

/** The sandbox an in-sandbox call names, once its token was checked against it. */
export function sandboxIdOf(request: FastifyRequest): string {
  const id = request.headers['e2b-sandbox-id'];
  if (typeof id !== 'string' || id === '') throw new AppError('validation_error', 'the E2b-Sandbox-Id header names the sandbox an in-sandbox call is for');
  return id;
}

export function authenticateE2b(organizations: Organizations, tokens: AccessTokens): onRequestHookHandler {
  return async (request) => {
    const path = request.url.split('?')[0] ?? request.url;
    if (isEnvdUrl(path)) {
      const token = request.headers['x-access-token'];
      if (typeof token !== 'string' || token === '') {
        throw new AppError('missing_api_key', 'in-sandbox calls need the sandbox access token in X-Access-Token (the SDK sends the one its create or connect answered)');
      }
      const grant = tokens.verify(token);
      if (grant.instanceId !== sandboxIdOf(request)) throw new AppError('invalid_api_key', 'the access token is for another sandbox than E2b-Sandbox-Id names');
      if (!(await organizations.keyIsActive(grant.caller))) throw new AppError('invalid_api_key', 'the API key this sandbox access token was made for has been revoked');
      request.caller = grant.caller;
    } else {
      const key = request.headers['x-api-key'];
      if (typeof key !== 'string' || key.trim() === '') {
        throw new AppError('missing_api_key', 'this endpoint needs a roomkit API key in X-API-KEY (set E2B_API_KEY to one; see `roomkit keys create`)');
      }
      request.caller = await organizations.authenticate(key.trim());
    }
    request.log = request.log.child({ organizationId: request.caller.organizationId, keyId: request.caller.keyId });
  };
}
