// Who calls the E2B adapter. The control API takes a roomkit API key in X-API-KEY (the
// header E2B's SDK sends E2B_API_KEY in); the in-sandbox calls take the sandbox's access
// token in X-Access-Token (or E2B-Traffic-Access-Token, where the code interpreter SDK
// sends it) and name the sandbox in E2b-Sandbox-Id, as the SDK sends them to
// E2B_SANDBOX_URL; a signed file URL carries a signature made with that token. The
// app attaches this hook to every route under the adapter's prefix as it is registered,
// before the API rate limits, so none goes without it.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Caller, Organizations } from '../../core/orgs.ts';
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

/**
 * The caller of a signed file URL (the SDK's uploadUrl and downloadUrl): E2B's signature
 * is a SHA-256 over the path, the operation (read for GET, write for POST), the user,
 * the sandbox's access token and the expiry, so the key whose token signed it is found
 * by trying the token of each active key of the sandbox's organization.
 */
async function signedFileCaller(
  request: FastifyRequest,
  organizations: Organizations,
  tokens: AccessTokens,
  instanceOrganization: (instanceId: string) => Promise<string | undefined>,
): Promise<Caller> {
  const query = request.query as Record<string, unknown>;
  const invalid = () => new AppError('invalid_api_key', 'the signed file URL is not valid for this sandbox (altered, expired, or its key revoked)');
  const sandboxId = sandboxIdOf(request);
  const organizationId = await instanceOrganization(sandboxId);
  if (organizationId === undefined) throw invalid();
  const expiration = typeof query.signature_expiration === 'string' ? query.signature_expiration : undefined;
  if (expiration !== undefined && !(Number(expiration) * 1000 > Date.now())) throw invalid();
  const operation = request.method === 'GET' ? 'read' : 'write';
  const user = typeof query.username === 'string' ? query.username : '';
  const filePath = typeof query.path === 'string' ? query.path : '';
  const given = Buffer.from(String(query.signature));
  for (const key of await organizations.listKeys(organizationId)) {
    const caller: Caller = { organizationId, keyId: key.key_id, env: key.env };
    const token = tokens.sign({ instanceId: sandboxId, caller });
    const signed = [filePath, operation, user, token, ...(expiration === undefined ? [] : [expiration])].join(':');
    const expected = Buffer.from(`v1_${createHash('sha256').update(signed).digest('base64').replace(/=+$/, '')}`);
    if (expected.length === given.length && timingSafeEqual(expected, given)) return caller;
  }
  throw invalid();
}

export function authenticateE2b(
  organizations: Organizations,
  tokens: AccessTokens,
  instanceOrganization: (instanceId: string) => Promise<string | undefined>,
): onRequestHookHandler {
  return async (request) => {
    const path = request.url.split('?')[0] ?? request.url;
    if (isEnvdUrl(path)) {
      // The code interpreter SDK sends the token of its context calls as the traffic token, which a create answers equal to the access token.
      const token = request.headers['x-access-token'] || request.headers['e2b-traffic-access-token'];
      const query = request.query as Record<string, unknown>;
      if ((token === undefined || token === '') && typeof query.signature === 'string' && path === `${ENVD_PREFIX}/files`) {
        request.caller = await signedFileCaller(request, organizations, tokens, instanceOrganization);
        request.log = request.log.child({ organizationId: request.caller.organizationId, keyId: request.caller.keyId });
        return;
      }
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
