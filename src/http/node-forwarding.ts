// Any node answers any request: one for a room whose instance another node's host runs
// (or for such an instance by its id: the raw endpoint, E2B's sandbox routes and its
// in-sandbox calls, a preview host name; or by a signed port URL's token, which any
// node opens) is carried to that node and its answer carried back, streamed both ways (an SSE
// stream, a download, an upload), and a WebSocket handshake (a terminal, a port) becomes
// a byte tunnel to it. The client never needs to know which node holds its instance.
//
// The hook runs before authentication: the owner authenticates the request itself (the
// store is shared), and a terminal's single-use ticket is redeemed by the node that
// issued it, which is the owner (the ticket request was forwarded there too). A
// forwarded request carries the nodes' shared secret (ROOMKIT_NODE_SECRET) in
// NODE_SECRET_HEADER and the client's address appended to X-Forwarded-For (which the
// owner believes of the nodes listed in ROOMKIT_TRUST_PROXY, so that its limits and
// its audit trail see the client), and is never forwarded again: the
// receiving node answers it, with 421 instance_on_another_node if the instance moved
// meanwhile. Without a secret nothing is forwarded, and core answers such requests 421.
//
// The owner gets the URL as the client sent it, before this node rewrote it for a host
// name (an E2B sandbox's envd host, a preview host): it rewrites it the same way.
//
// A profile given by name is resolved with the caller's key (a second look-up of the key
// on this node); a request with neither an id nor a key is answered here.
import { createHash, timingSafeEqual } from 'node:crypto';
import { request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { AppError } from '../errors.ts';
import type { Services } from '../services.ts';
import { agents, CONNECT_TIMEOUT_MS, HOP_BY_HOP, headersFor, NODE_SECRET_HEADER, unreachable, unreachableBody, type NodeAddress } from './node-requests.ts';
import { placeCreate } from './node-placement.ts';

/** The create route, whose instance placement may start on another node (http/node-placement.ts). */
const CREATE_ROUTE = '/api/profile/:profile_id/room/:room_id';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** The hook that forwards a room's request to the node that runs its instance; undefined when this service forwards nothing. */
export function nodeForwarding(services: Services, previewHost: (request: FastifyRequest) => string | undefined): onRequestHookHandler | undefined {
  const secret = services.config.nodeSecret;
  if (services.nodes === undefined || secret === undefined) return undefined;
  const expected = digest(secret);
  return async (request, reply) => {
    const given = request.headers[NODE_SECRET_HEADER];
    if (given !== undefined) {
      if (typeof given !== 'string' || !timingSafeEqual(digest(given), expected)) {
        throw new AppError('invalid_node_credential', `${NODE_SECRET_HEADER} does not hold this node's ROOMKIT_NODE_SECRET: nodes of one store share one secret`);
      }
      return; // Forwarded by another node: answered here.
    }
    const at = await instanceOf(services, request, previewHost);
    if (at === undefined) return;
    const owner = await services.instances.ownerElsewhere(at);
    if (owner === undefined) {
      // A create for a room with no live instance: perhaps another node should make it.
      if ('profileId' in at && request.method === 'POST' && request.routeOptions.url === CREATE_ROUTE) await placeCreate(services, request, reply, secret, at);
      return;
    }
    request.log.debug({ nodeId: owner.nodeId }, 'forwarding to the node that runs the instance');
    reply.hijack();
    if (typeof request.headers.upgrade === 'string') tunnel(request, owner, secret);
    else forward(request, reply, owner, secret);
  };
}

/**
 * What the request names: a room (by profile id or name), or an instance by id (the raw
 * endpoint's path, an E2B sandbox's path or its E2b-Sandbox-Id header); undefined for a
 * request that names neither, answered here.
 */
async function instanceOf(
  services: Services,
  request: FastifyRequest,
  previewHost: (request: FastifyRequest) => string | undefined,
): Promise<{ profileId: string; roomId: string } | { instanceId: string } | undefined> {
  const params = (request.params ?? {}) as { profile_id?: string; room_id?: string; instance_id?: string; sandboxID?: string; token?: string };
  if (params.profile_id !== undefined && params.room_id !== undefined) {
    const profileId = await profileIdOf(services, request, params.profile_id);
    return profileId === undefined ? undefined : { profileId, roomId: params.room_id };
  }
  const header = request.headers['e2b-sandbox-id'];
  const instanceId =
    params.instance_id ??
    params.sandboxID ??
    (typeof header === 'string' ? header : undefined) ??
    // A signed port URL: its token opens with the nodes' shared secret on any node.
    (params.token !== undefined ? services.ports.instanceOfToken(params.token) : undefined) ??
    previewHost(request);
  return instanceId !== undefined && UUID.test(instanceId) ? { instanceId } : undefined;
}

async function profileIdOf(services: Services, request: FastifyRequest, given: string): Promise<string | undefined> {
  if (UUID.test(given)) return given;
  const key = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
  if (key === undefined) return undefined;
  const caller = await services.organizations.authenticate(key).catch(() => undefined);
  if (caller === undefined) return undefined; // Answered here: invalid_api_key, as anywhere.
  return services.profiles.idOfName(caller.organizationId, given);
}

function forward(request: FastifyRequest, reply: FastifyReply, owner: NodeAddress, secret: string): void {
  const target = new URL(owner.url);
  const https = target.protocol === 'https:';
  const upstream = (https ? httpsRequest : httpRequest)({
    host: target.hostname,
    port: target.port === '' ? (https ? 443 : 80) : Number(target.port),
    method: request.method,
    path: request.originalUrl,
    headers: headersFor(request, secret, false),
    agent: https ? agents.https : agents.http,
  });
  const connectTimer = setTimeout(() => upstream.destroy(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
  upstream.once('socket', (socket: Socket) => {
    if (!socket.connecting) clearTimeout(connectTimer);
    else socket.once(https ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
  });
  upstream.once('response', (answer) => {
    clearTimeout(connectTimer);
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    reply.raw.writeHead(answer.statusCode ?? 502, headers);
    answer.pipe(reply.raw);
  });
  upstream.once('error', (err) => {
    clearTimeout(connectTimer);
    if (!reply.raw.headersSent) unreachable(reply, owner, err);
    else reply.raw.destroy();
  });
  // The client went away before the answer ended: the owner's request ends too (an SSE
  // stream stops, a command that ends with its client is told).
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) upstream.destroy();
  });
  request.raw.pipe(upstream);
}

function tunnel(request: FastifyRequest, owner: NodeAddress, secret: string): void {
  const client = request.raw.socket;
  const target = new URL(owner.url);
  const https = target.protocol === 'https:';
  const port = target.port === '' ? (https ? 443 : 80) : Number(target.port);
  const upstream = https ? tlsConnect({ host: target.hostname, port, servername: target.hostname }) : netConnect({ host: target.hostname, port });
  const lines = [`${request.method} ${request.originalUrl} HTTP/1.1`];
  for (const [name, value] of Object.entries(headersFor(request, secret, true))) {
    for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${String(one)}`);
  }
  upstream.setTimeout(CONNECT_TIMEOUT_MS, () => upstream.destroy(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`)));
  upstream.once(https ? 'secureConnect' : 'connect', () => {
    upstream.setTimeout(0);
    upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.once('error', (err) => {
    if (upstream.bytesRead === 0 && client.writable) {
      const body = unreachableBody(owner, err);
      const text = JSON.stringify(body);
      client.end(`HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
    } else client.destroy();
  });
  client.once('error', () => upstream.destroy());
  client.once('close', () => upstream.destroy());
  upstream.once('close', () => client.destroy());
}

