// Builds the HTTP server without listening, so tests can call it in-process with
// inject() and `roomkit serve` can listen on it. The server is the shell (request ids,
// authentication, rate limits, the Error body, audit hooks, /openapi.json, health); it
// mounts the adapters that speak a protocol over core/: the REST API
// (adapters/rest/) and the MCP endpoint (adapters/mcp/), both over the agent tool layer
// (adapters/tools/) where they offer tools, E2B's API (adapters/e2b/) and the web
// console (adapters/console/). Routes stay thin: authenticate, validate (by their
// schemas), call a service, shape the response.
import type { Socket } from 'node:net';
import websocket from '@fastify/websocket';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyServerOptions, type onRequestHookHandler } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import Type from 'typebox';
import { AppError, ERROR_STATUS } from './errors.ts';
import { requestLogContext } from './log.ts';
import type { Services } from './services.ts';
import { installAudit } from './http/audit.ts';
import { authenticate, requiresAuth } from './http/auth.ts';
import { resolveProfileNames } from './adapters/rest/profile-names.ts';
import { installErrorHandling, sendError } from './http/errors.ts';
import { auditRoutes } from './adapters/rest/routes/audit.ts';
import { commandRoutes } from './adapters/rest/routes/commands.ts';
import { contextRoutes } from './adapters/rest/routes/contexts.ts';
import { fileRoutes, rewriteFileUrl } from './adapters/rest/routes/files.ts';
import { keyRoutes } from './adapters/rest/routes/keys.ts';
import { metricsRoutes } from './adapters/rest/routes/metrics.ts';
import { profileRoutes } from './adapters/rest/routes/profiles.ts';
import { snapshotRoutes } from './adapters/rest/routes/snapshots.ts';
import { templateRoutes } from './adapters/rest/routes/templates.ts';
import { roomRoutes } from './adapters/rest/routes/rooms.ts';
import { networkRoutes } from './adapters/rest/routes/network.ts';
import { operatorRoutes } from './adapters/rest/routes/operator.ts';
import { PREVIEW_HOST_ROUTE, portRoutes, portUrlRewriter, previewHostOf, SIGNED_PATH_ROUTE } from './adapters/rest/routes/ports.ts';
import { MAX_TERMINAL_MESSAGE_BYTES, terminalRoutes } from './adapters/rest/routes/terminal.ts';
import { toolRoutes } from './adapters/rest/routes/tools.ts';
import { mcpRoutes } from './adapters/mcp/http-route.ts';
import { RoomTools } from './adapters/tools/room-tools.ts';
import { restMessage } from './adapters/rest/hint-wording.ts';
import { rawFileUrl } from './adapters/rest/raw-file-url.ts';
import { usageRoutes } from './adapters/rest/routes/usage.ts';
import { AccessTokens } from './adapters/e2b/access-tokens.ts';
import { authenticateE2b, isE2bUrl } from './adapters/e2b/auth.ts';
import { envdHostRewriter } from './adapters/e2b/envd-host.ts';
import { mountE2b } from './adapters/e2b/mount.ts';
import { mountConsole } from './adapters/console/mount.ts';
import { checkReadiness } from './core/readiness.ts';
import { installOpenApi } from './http/openapi.ts';
import { installRateLimits } from './http/rate-limits.ts';
import { nodeForwarding } from './http/node-forwarding.ts';
import { AuthThrottle } from './http/auth-throttle.ts';
import { installIdempotency } from './http/idempotency.ts';
import { RequestLog } from './http/request-log.ts';
import { requestIdGenerator, trustedPeers } from './http/request-id.ts';
import { ErrorBody, errorResponses } from './http/schemas.ts';
import type { App } from './http/types.ts';

/**
 * The API's version: /openapi.json's info.version, /healthz, the /docs page, and the
 * TypeScript SDK's package version (written by npm run sdk:generate).
 */
export const API_VERSION = '1.0.0';
/** Longest path parameter the router accepts (file paths come through one). */
const MAX_PARAM_LENGTH = 4096;
/** The routes of a room (its instance, commands, files, terminal, ports, tools, snapshots): forwarded to its instance's node. */
const ROOM_ROUTE = /^\/api\/profile\/:profile_id\/room\/:room_id(?:\/|$)/;

export interface RouteEntry {
  method: string;
  url: string;
  /** The audit action the route expects core to name (its config's auditAction). */
  auditAction?: string | null;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered (HEAD aside): what tests walk to check auth and scoping. */
    routeTable: readonly RouteEntry[];
  }
}

export interface AppOptions {
  /** Fastify's logger option; defaults to the services' logger. */
  logger?: FastifyServerOptions['loggerInstance'];
}

export async function buildApp(services: Services, options: AppOptions = {}): Promise<App> {
  const rewritePortUrl = portUrlRewriter(services.config);
  const rewriteEnvdHost = envdHostRewriter(services.config.previewDomain);
  const app = Fastify({
    loggerInstance: options.logger ?? services.log,
    bodyLimit: services.config.bodyLimitBytes,
    // Behind trusted proxies, request.ip is the client's (from X-Forwarded-For).
    trustProxy: services.config.trustProxy.length > 0 ? [...services.config.trustProxy] : false,
    genReqId: requestIdGenerator(trustedPeers(services.config.trustProxy)),
    // Requests to a sandbox's envd host name go to the E2B adapter (adapters/e2b/envd-host.ts),
    // requests to another preview host name to its port whatever their path (adapters/rest/routes/ports.ts);
    // file URLs whose paths are not UTF-8 are made routable.
    rewriteUrl: (req) => {
      const url = req.url ?? '/';
      const envd = rewriteEnvdHost(req, url);
      if (envd !== undefined) return envd;
      const port = rewritePortUrl(req, url);
      return port === url ? rewriteFileUrl(url) : port;
    },
    // One log line per request, when answered (http/request-log.ts).
    logController: new RequestLog(),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // While closing, requests on open connections get our own 503 (hook below).
    return503OnClosing: false,
    // Errors the router raises before any route runs, in the same Error body.
    frameworkErrors: (err, request, reply) => {
      const body =
        err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? ({ error: 'uri_too_long', message: `a path segment is longer than ${MAX_PARAM_LENGTH} characters` } as const)
          : ({ error: 'invalid_url', message: 'the request URL is not valid (check its percent-encoding)' } as const);
      // No hook runs for these, so they are counted here.
      services.metrics.httpResponse(request.method, 'unmatched', ERROR_STATUS[body.error], reply.elapsedTime / 1000);
      services.metrics.errorSent(body.error);
      return sendError(reply, body);
    },
    ajv: {
      customOptions: {
        // Unknown fields are an error naming the field, never silently dropped; no
        // value is coerced to another type; defaults are applied by the services.
        removeAdditional: false,
        coerceTypes: false,
        useDefaults: false,
        allErrors: true,
      },
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.decorateRequest('caller', null);
  app.decorateRequest('errorCode', null);

  // Lines the services log while answering a request carry its id (see log.ts).
  app.addHook('onRequest', (request, reply, done) => {
    const context = { requestId: request.id, open: true };
    reply.raw.once('close', () => (context.open = false));
    requestLogContext.run(context, done);
  });

  // Every route under /api/ authenticates and then counts against its key's and
  // organization's rate limits; the raw file route counts against its own. Attached
  // here, as routes register, so no route can be added without them. Also keeps a
  // router of all routes to tell a wrong method (405) from an unknown path (404).
  // A client address that presents too many rejected keys is refused for a while (http/auth-throttle.ts).
  const authThrottle = new AuthThrottle({ burst: services.config.authFailureBurst, windowS: services.config.authFailureWindowS }, services.metrics);
  const auth = authThrottle.guard(authenticate(services.organizations, services.terminalTickets, services.consoleSessions));
  const e2bTokens = new AccessTokens(services.config.dataDir);
  // A signed file URL names its sandbox only: its organization is that of the instance,
  // looked up once it is known to be ready (so that no such request wakes a paused one).
  const e2bAuth = authThrottle.guard(
    authenticateE2b(services.organizations, e2bTokens, async (instanceId) =>
      (await services.instances.isReady(instanceId)) ? (await services.instances.readyById(instanceId))?.row.organization_id : undefined,
    ),
  );
  const limits = await installRateLimits(app, services.config, services.metrics, services.rateLimitCounters);
  const forwarding = nodeForwarding(services, (request) => previewHostOf(request.headers.host, services.config.previewDomain)?.instanceId);
  const known = FindMyWay({ ignoreTrailingSlash: true, defaultRoute: () => {} });
  const routes: RouteEntry[] = [];
  app.decorate('routeTable', routes);
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (method !== 'HEAD') routes.push({ method, url: route.url, ...(route.config?.auditAction === undefined ? {} : { auditAction: route.config.auditAction }) });
      if (method !== 'HEAD' && !known.hasRoute(method as HTTPMethod, route.url)) known.on(method as HTTPMethod, route.url, () => {});
    }
    const existing = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    if (isE2bUrl(route.url)) route.onRequest = [e2bAuth, limits.api, ...existing];
    else if (requiresAuth(route.url)) route.onRequest = [auth, limits.api, ...existing];
    const preview = route.url.startsWith(`${SIGNED_PATH_ROUTE}/`) || route.url.startsWith(`${PREVIEW_HOST_ROUTE}/`);
    if (route.url.startsWith('/vm/')) route.onRequest = [limits.rawFiles, ...existing];
    else if (preview) route.onRequest = [limits.preview, ...existing];
    // A request for a room's instance, or for an instance by id, goes to the node that
    // runs it, before anything else here (http/node-forwarding.ts): that node
    // authenticates and counts it.
    if (forwarding !== undefined && (ROOM_ROUTE.test(route.url) || isE2bUrl(route.url) || route.url.startsWith('/vm/') || preview)) {
      route.onRequest = [forwarding, ...((route.onRequest ?? []) as onRequestHookHandler[])];
    }
  });
  const allowedMethods = (method: string, path: string) =>
    (['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).filter((m) => m !== method && known.find(m, path) !== null);
  installErrorHandling(app, allowedMethods, restMessage);

  // JSON only. An empty body counts as {} so `curl -X POST -H 'Content-Type:
  // application/json'` works for endpoints whose fields are all optional.
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, {});
    return parseJson(request, text, done);
  });
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined && request.routeOptions.schema?.body) request.body = {};
  });
  resolveProfileNames(app, services.profiles);

  let closing = false;
  // Node's server.close() ends idle keep-alive connections but waits for ones on which
  // no request has started yet until its headers timeout (60 s): a client's spare
  // connection would hold a shutdown for a minute. While closing, such connections and
  // newly idle ones are ended every half second; requests in flight finish.
  const sockets = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  app.addHook('preClose', async () => {
    closing = true;
    const sweep = setInterval(() => {
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
      app.server.closeIdleConnections();
    }, 500);
    sweep.unref();
    app.server.once('close', () => clearInterval(sweep));
  });
  app.addHook('onRequest', async () => {
    if (closing) throw new AppError('shutting_down', 'the server is shutting down; retry against a running server');
  });
  installAudit(app, services.audit);
  installIdempotency(app, services.idempotencyKeys);

  // Every answer is counted by its route's pattern (never the raw URL, which holds ids
  // and paths) and status; every Error body by its code.
  app.addHook('onResponse', async (request, reply) => {
    services.metrics.httpResponse(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
    if (request.errorCode !== null) services.metrics.errorSent(request.errorCode);
  });

  const nodeId = services.nodes?.nodeId;
  app.addHook('onSend', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
    // Which node answered, where several share a store (a forwarded request says the owner).
    if (nodeId !== undefined) reply.header('X-Roomkit-Node', nodeId);
    reply.header('X-Content-Type-Options', 'nosniff');
    if (requiresAuth(request.url)) reply.header('Cache-Control', 'no-store');
  });

  app.addSchema(ErrorBody);
  await installOpenApi(app, services, API_VERSION);
  // Terminals (adapters/rest/routes/terminal.ts). On close, their clients are told the server is going away.
  await app.register(websocket, {
    options: { maxPayload: MAX_TERMINAL_MESSAGE_BYTES },
    preClose: async () => {
      for (const client of app.websocketServer.clients) client.close(1001, 'shutting_down');
    },
  });
  // A WebSocket's 101 answer says which node answered too (it bypasses onSend).
  if (nodeId !== undefined) app.websocketServer.on('headers', (headers: string[]) => headers.push(`X-Roomkit-Node: ${nodeId}`));

  // The raw endpoint is the REST API's: it says how core links a file (public_url).
  services.fileLinks.use(rawFileUrl);
  // Registration order is the order of /openapi.json's paths.
  const tools = new RoomTools(services, rawFileUrl);
  keyRoutes(app, services);
  profileRoutes(app, services);
  roomRoutes(app, services);
  networkRoutes(app, services);
  snapshotRoutes(app, services);
  templateRoutes(app, services);
  commandRoutes(app, services);
  contextRoutes(app, services);
  fileRoutes(app, services);
  terminalRoutes(app, services);
  portRoutes(app, services);
  toolRoutes(app, services, tools);
  usageRoutes(app, services);
  mcpRoutes(app, services, tools);
  operatorRoutes(app, services);
  metricsRoutes(app, services);
  auditRoutes(app, services);
  await mountE2b(app, services, e2bTokens);
  mountConsole(app, services, { authThrottle });

  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getHealth',
        summary: 'Health of the service',
        description: 'Answers 200 while the service runs; says whether instances can be created and, if not, why.',
        tags: ['meta'],
        response: {
          200: Type.Object({
            status: Type.Literal('ok'),
            version: Type.String(),
            runtime: Type.Object({
              available: Type.Boolean(),
              name: Type.Optional(Type.String()),
              reason: Type.Optional(Type.String()),
            }),
          }),
        },
      },
    },
    async () => {
      const selection = services.runtime;
      return {
        status: 'ok' as const,
        version: API_VERSION,
        runtime:
          'runtime' in selection
            ? { available: true, name: selection.runtime.name }
            : { available: false, reason: selection.unavailable.reason },
      };
    },
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'getReadiness',
        summary: 'Readiness of the service',
        description:
          'Answers 200 when the service can do its work: its store answers and an instance runtime is available; ' +
          'else 503 not_ready saying what is missing (and retry_after_s). For load balancers and readiness probes; /healthz is liveness.',
        tags: ['meta'],
        response: {
          200: Type.Object({ status: Type.Literal('ready'), store: Type.Literal('ok'), runtime: Type.String() }),
          ...errorResponses(503),
        },
      },
    },
    async () => {
      const readiness = await checkReadiness(services.db, services.runtime);
      if (!readiness.ready) {
        const reasons = [readiness.store, readiness.runtime].flatMap((part) => (part.ok ? [] : [part.reason]));
        throw new AppError('not_ready', `not ready: ${reasons.join('; ')}`, { retry_after_s: 5 });
      }
      return { status: 'ready' as const, store: 'ok' as const, runtime: readiness.runtime.ok ? readiness.runtime.name : '' };
    },
  );

  return app;
}
