// Ports of a room's instance reached from outside, in three forms:
// - …/ports/{port}/{path}: any method, with the API key (which the instance never sees);
// - /p/{token}/{path}: a signed, expiring URL from POST …/ports/{port}/url, on any host;
// - {port}-{instance_id}.{ROOMKIT_PREVIEW_DOMAIN}: a host name of its own, for web apps
//   in browsers, with the signed URL's token once in the query and then in a cookie of
//   that host (requests with such a Host are rewritten to PREVIEW_HOST_ROUTE as they arrive).
// Each proxies plain HTTP and WebSocket upgrades (port-proxy.ts); the routes here
// only find the target, count the connection and choose what is dropped on the way.
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import type { Config } from '../../../config.ts';
import { PortUrl, PortUrlRequest } from '../../../core/port-schema.ts';
import type { PortTarget } from '../../../core/ports.ts';
import { AppError } from '../../../errors.ts';
import type { Services } from '../../../services.ts';
import { auditInstance, auditUpgraded } from '../../../http/audit.ts';
import type { DocumentedResponse } from '../../../http/openapi.ts';
import { callerOf } from '../../../http/auth.ts';
import { isUpgrade, type ProxyOptions, proxyHttp, proxyUpgrade } from '../port-proxy.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';

const PORT_PATH = '/api/profile/:profile_id/room/:room_id/ports/:port';
/** Where requests to a preview host name are routed (never reached by its own path on another host). */
export const PREVIEW_HOST_ROUTE = '/preview-host';
/** Signed URLs on the service's own host. */
export const SIGNED_PATH_ROUTE = '/p';
/** The query parameter that carries a preview token to a preview host once. */
export const PREVIEW_TOKEN_PARAM = 'roomkit_token';
/** The cookie that carries it after (host-only: each preview host has its own). */
export const PREVIEW_COOKIE = 'roomkit_preview';

/** The methods the path form documents, one operation each (HEAD comes with GET). */
const PROXIED_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const OTHER_METHODS = ['HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
const ALL_METHODS = ['GET', ...OTHER_METHODS];
const PATH_FORM_URL = /^(\/api\/profile\/[^/?]+\/room\/[^/?]+\/ports\/[^/?]+)(\/[^?]*)?(\?.*)?$/s;
const SIGNED_URL = /^(\/p\/[^/?]+)(\/[^?]*)?(\?.*)?$/s;
const PREVIEW_HOST = /^(\d{1,5})-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.(.+)$/;

const PortParams = Type.Object({
  ...RoomParams.properties,
  port: Type.String({ maxLength: 16, description: 'The TCP port inside the instance, 1-65535 (not roomkit\'s own agent port, nor one the operator reserved)' }),
});
const ProxyParams = Type.Object({
  ...PortParams.properties,
  '*': Type.String({ description: 'The path asked of the program in the instance (the query string goes along)' }),
});
const SignedParams = Type.Object({
  token: Type.String({ maxLength: 1024, description: 'The token of a signed URL from POST …/ports/{port}/url' }),
  '*': Type.String({ description: 'The path asked of the program in the instance (the query string goes along)' }),
});

/** The port and instance a preview host name names, when the Host header is one under the preview domain. */
export function previewHostOf(hostHeader: string | undefined, domain: string | undefined): { port: string; instanceId: string } | undefined {
  if (domain === undefined || hostHeader === undefined) return undefined;
  const match = PREVIEW_HOST.exec(hostHeader.toLowerCase());
  if (!match) return undefined;
  const [, port = '', instanceId = '', rest = ''] = match;
  const withoutPort = (h: string) => h.replace(/:\d+$/, '');
  return withoutPort(rest) === withoutPort(domain) ? { port, instanceId } : undefined;
}

const PORT_ROOT_URL = /^(\/api\/profile\/[^/?]+\/room\/[^/?]+\/ports\/[^/?]+)\/?(\?.*)?$/s;
const SIGNED_ROOT_URL = /^(\/p\/[^/?]+)\/(\?.*)?$/s;

/**
 * For the app's rewriteUrl: a request to a preview host name goes to PREVIEW_HOST_ROUTE,
 * whatever its path; the root of a port (`…/ports/8000`, `…/ports/8000/`, `/p/{token}/`)
 * to its wildcard route, which the router (ignoring trailing slashes) would not match.
 * The handlers read the original URL.
 */
export function portUrlRewriter(config: Config): (req: IncomingMessage, url: string) => string {
  const domain = config.previewDomain;
  return (req, url) => {
    if (previewHostOf(req.headers.host, domain)) return `${PREVIEW_HOST_ROUTE}/${url}`;
    if (!url.includes('/ports/') && !url.startsWith('/p/')) return url;
    const root = PORT_ROOT_URL.exec(url) ?? SIGNED_ROOT_URL.exec(url);
    return root ? `${root[1]}//${root[2] ?? ''}` : url;
  };
}

export function portRoutes(app: App, { ports, config, audit }: Services): void {
  const timeouts = { timeoutMs: config.portProxyTimeoutS * 1000, idleTimeoutMs: config.portProxyIdleTimeoutS * 1000 };

  /** Proxies one request (or WebSocket) to the target, counted against its instance's connections. */
  const forward = async (request: FastifyRequest, reply: FastifyReply, target: PortTarget, shape: Omit<ProxyOptions, 'target' | 'connection' | 'timeoutMs' | 'idleTimeoutMs'>) => {
    const connection = ports.connect(target.instanceId);
    const options: ProxyOptions = { ...shape, ...timeouts, target, connection };
    if (request.ws && isUpgrade(request)) {
      await proxyUpgrade(request, reply, options);
      auditUpgraded(request, audit, { instance_id: target.instanceId });
      return reply;
    }
    try {
      return await proxyHttp(request, reply, options);
    } catch (err) {
      connection.release();
      throw err;
    }
  };

  // The API key's form.
  const pathForm = async (request: FastifyRequest, reply: FastifyReply) => {
    const { profile_id, room_id, port } = request.params as { profile_id: string; room_id: string; port: string };
    const target = await ports.target(callerOf(request).organizationId, profile_id, room_id, port);
    auditInstance(request, target.instanceId);
    const [, prefix = '', path = '/', query = ''] = PATH_FORM_URL.exec(request.originalUrl) ?? [];
    return forward(request, reply, target, { upstreamPath: `${path}${query}`, dropAuthorization: 'all', prefix, sandbox: true });
  };

  // A signed URL on this host.
  const signedPath = async (request: FastifyRequest, reply: FastifyReply) => {
    const { token } = request.params as { token: string };
    const target = await ports.targetOfGrant(ports.verify(token));
    const [, prefix = '', path = '/', query = ''] = SIGNED_URL.exec(request.originalUrl) ?? [];
    return forward(request, reply, target, { upstreamPath: `${path}${query}`, dropAuthorization: 'keys', prefix, sandbox: true });
  };

  // A preview host name.
  const previewHost = async (request: FastifyRequest, reply: FastifyReply) => {
    const named = previewHostOf(request.headers.host, config.previewDomain);
    if (!named) throw new AppError('not_found', `no route ${request.method} ${request.url.split('?')[0]}; see /openapi.json`);
    const fromQuery = queryParam(request.originalUrl, PREVIEW_TOKEN_PARAM);
    const token = fromQuery ?? cookie(request.headers.cookie, PREVIEW_COOKIE);
    if (token === undefined) {
      throw new AppError(
        'invalid_preview_token',
        `this host name reaches port ${named.port} of instance ${named.instanceId} only through a signed URL: get one with POST /api/profile/{profile}/room/{room}/ports/${named.port}/url and open its url`,
      );
    }
    const grant = ports.verify(token);
    if (grant.instanceId !== named.instanceId || String(grant.port) !== named.port) {
      throw new AppError('invalid_preview_token', `this preview URL was made for port ${grant.port} of instance ${grant.instanceId}, not for this host name`);
    }
    const upstreamPath = withoutQueryParam(request.originalUrl, PREVIEW_TOKEN_PARAM);
    if (fromQuery !== undefined) {
      // The token moves from the URL (history, Referer, the program's logs) into a cookie of this host alone.
      const maxAgeS = Math.max(1, Math.floor((grant.expiresAt - Date.now()) / 1000));
      const secure = request.protocol === 'https' ? '; Secure' : '';
      reply.header('Set-Cookie', `${PREVIEW_COOKIE}=${token}; Path=/; Max-Age=${maxAgeS}; HttpOnly; SameSite=Lax${secure}`);
      if ((request.method === 'GET' || request.method === 'HEAD') && !request.ws) {
        await ports.targetOfGrant(grant);
        return reply.header('Cache-Control', 'no-store').header('Referrer-Policy', 'no-referrer').redirect(upstreamPath, 303);
      }
    }
    const target = await ports.targetOfGrant(grant);
    return forward(request, reply, target, { upstreamPath, dropAuthorization: 'keys', dropCookie: PREVIEW_COOKIE, sandbox: false });
  };

  /** Upgrades are proxied before the WebSocket plugin's handler could accept them itself. */
  const upgradeFirst = (handler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>) => async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.ws) await handler(request, reply);
  };

  const proxyErrors = errorResponses(400, 401, 404, 409, 429, 502, 504);
  const anyBody = { '*/*': { schema: { description: 'Whatever the program sends' } } };
  /** What the document says of a proxied answer, which validation cannot describe. */
  const proxiedAnswers = (upgrade: boolean): { documentedResponses: Record<number, DocumentedResponse> } => {
    const answers: Record<number, DocumentedResponse> = {
      200: { description: 'The program\'s answer, status, headers and body as it sent them (any status)', content: anyBody },
    };
    if (upgrade) answers[101] = { description: 'Switching Protocols: the program accepted the WebSocket; bytes flow both ways as they come' };
    return { documentedResponses: answers };
  };
  const described =
    'Any method: the request goes to the port inside the room\'s instance, body and answer streamed both ways, and a WebSocket ' +
    '(`Upgrade: websocket`) is carried as it is. Hop-by-hop headers are dropped, X-Forwarded-For, -Proto, -Host and -Prefix are set; ' +
    'the Authorization header (the API key) never reaches the instance. Pages answered here run sandboxed in browsers ' +
    '(Content-Security-Policy: sandbox): for web apps use a signed URL\'s host form. 502 `port_not_listening` when nothing listens on the port, ' +
    '504 `port_timeout` when the program does not answer in time. `POST …/ports/{port}/url` is the signing endpoint, not proxied.';

  // Routes that take any body as a stream, unparsed: in a scope of their own so every
  // other route keeps its JSON-only parsing.
  void app.register(async (scope: App) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null));

    // One operation per method, so each has its own operationId.
    for (const method of PROXIED_METHODS) {
      scope.route({
        method,
        url: `${PORT_PATH}/*`,
        // A GET is recorded only when it opens a WebSocket (http/audit.ts).
        config: { ...proxiedAnswers(method === 'GET'), auditAction: method === 'GET' ? 'port.websocket' : 'port.request' },
        schema: {
          operationId: `proxyPort${method.charAt(0)}${method.slice(1).toLowerCase()}`,
          summary: method === 'GET' ? 'Reach a port of the instance (HEAD, and WebSocket upgrades, too)' : `Reach a port of the instance (${method})`,
          description: described,
          tags: ['ports'],
          params: ProxyParams,
          response: proxyErrors,
        },
        ...(method === 'GET' ? { preHandler: upgradeFirst(pathForm) } : {}),
        handler: pathForm,
      });
    }

    scope.route({
      method: 'GET',
      url: `${SIGNED_PATH_ROUTE}/:token/*`,
      exposeHeadRoute: false,
      config: proxiedAnswers(true),
      schema: {
        operationId: 'proxySignedPort',
        summary: 'Reach a port through a signed URL (no API key)',
        description:
          'The `path_url` of POST …/ports/{port}/url: the same as …/ports/{port}/{path} (any method, WebSocket too), authenticated by the URL\'s token until it expires. ' +
          'A roomkit API key in Authorization is dropped; any other Authorization goes to the program.',
        tags: ['ports'],
        params: SignedParams,
        response: proxyErrors,
      },
      preHandler: upgradeFirst(signedPath),
      handler: signedPath,
    });
    scope.route({ method: OTHER_METHODS, url: `${SIGNED_PATH_ROUTE}/:token/*`, schema: { hide: true, params: SignedParams }, handler: signedPath });
    // `/p/{token}` without its slash is redirected to it, so that the program's relative links resolve under it.
    scope.route({
      method: ALL_METHODS,
      url: `${SIGNED_PATH_ROUTE}/:token`,
      schema: { hide: true, params: Type.Object({ token: SignedParams.properties.token }) },
      handler: async (request, reply) => {
        const [path = '', query = ''] = splitQuery(request.originalUrl);
        return reply.redirect(`${path}/${query}`, 308);
      },
    });
    scope.route({ method: ALL_METHODS, url: `${PREVIEW_HOST_ROUTE}/*`, schema: { hide: true }, preHandler: upgradeFirst(previewHost), handler: previewHost });
  });

  app.post(
    `${PORT_PATH}/url`,
    {
      config: { auditAction: 'port.url' },
      schema: {
        operationId: 'createPortUrl',
        summary: 'Get a signed URL of a port (for browsers)',
        description:
          'A URL that reaches the port without an API key until it expires (`expires_in_s`; default 1 hour, at most ROOMKIT_PREVIEW_URL_MAX_EXPIRY_S), ' +
          'while the instance runs and the key that asked stays active. With ROOMKIT_PREVIEW_DOMAIN set, `url` is the host form ' +
          '`{port}-{instance_id}.{domain}` for web apps; `path_url` (/p/{token}/) works on any host. Anyone holding the URL reaches the port: hand it only to whom may.',
        tags: ['ports'],
        params: PortParams,
        body: PortUrlRequest,
        response: { 201: PortUrl, ...errorResponses(400, 401, 404, 409) },
      },
    },
    async (request, reply) => {
      const { profile_id, room_id, port } = request.params;
      const { token, target, expiresAt } = await ports.sign(callerOf(request), profile_id, room_id, port, request.body.expires_in_s);
      const base = config.publicUrl ?? `${request.protocol}://${request.host}`;
      const pathUrl = `${base}${SIGNED_PATH_ROUTE}/${token}/`;
      const scheme = config.publicUrl === undefined ? request.protocol : new URL(config.publicUrl).protocol.replace(/:$/, '');
      const hostUrl =
        config.previewDomain === undefined ? undefined : `${scheme}://${target.port}-${target.instanceId}.${config.previewDomain}/?${PREVIEW_TOKEN_PARAM}=${token}`;
      auditInstance(request, target.instanceId);
      return reply.code(201).send({
        url: hostUrl ?? pathUrl,
        path_url: pathUrl,
        ...(hostUrl === undefined ? {} : { host_url: hostUrl }),
        instance_id: target.instanceId,
        port: target.port,
        expires_at: new Date(expiresAt).toISOString(),
      });
    },
  );
}

/** A raw URL's path, and its query from the `?` (or ''). */
function splitQuery(url: string): [string, string] {
  const at = url.indexOf('?');
  return at < 0 ? [url, ''] : [url.slice(0, at), url.slice(at)];
}

/** A query parameter of a raw URL, decoded; undefined when absent. */
function queryParam(url: string, name: string): string | undefined {
  const query = url.split('?').slice(1).join('?');
  return query === '' ? undefined : (new URLSearchParams(query).get(name) ?? undefined);
}

/** The raw URL without one query parameter; the rest as it was sent. */
function withoutQueryParam(url: string, name: string): string {
  const at = url.indexOf('?');
  if (at < 0) return url;
  const kept = url
    .slice(at + 1)
    .split('&')
    .filter((item) => {
      const key = item.split('=')[0] ?? '';
      try {
        return decodeURIComponent(key.replace(/\+/g, ' ')) !== name;
      } catch {
        return true;
      }
    });
  return kept.length === 0 ? url.slice(0, at) : `${url.slice(0, at)}?${kept.join('&')}`;
}

function cookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}
