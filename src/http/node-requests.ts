// How a node carries a request to another node of the same store: connections kept open
// between requests, the headers passed on (end-to-end ones, the nodes' shared secret, the
// client's address), and the answer when the other node does not answer. Used to
// forward a request to the node that runs its instance (node-forwarding.ts) and to send
// a create to the node placement chose (node-placement.ts).
import { Agent as HttpAgent, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorBody } from '../errors.ts';

/** Carries the nodes' shared secret on a forwarded request. */
export const NODE_SECRET_HEADER = 'x-roomkit-node-secret';

/** A node as a request reaches it. */
export interface NodeAddress {
  nodeId: string;
  url: string;
}

/** Headers about one connection, not the message (RFC 9110 7.6.1): never passed on, but for a handshake's. */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
/** How long the owner may take to accept the connection before the request is answered node_unreachable. */
export const CONNECT_TIMEOUT_MS = 3_000;

/**
 * Connections to other nodes, kept open between requests: a forwarded command costs no
 * new handshake. As many at once as requests need (an SSE stream holds one for as long
 * as it runs: a cap would queue the next request behind the streams); idle ones kept up to a bound.
 */
export const agents = { http: new HttpAgent({ keepAlive: true, maxFreeSockets: 64 }), https: new HttpsAgent({ keepAlive: true, maxFreeSockets: 64 }) };

/** The request's headers for the owner: the end-to-end ones, the secret and the client's address (after any proxies' chain). */
export function headersFor(request: FastifyRequest, secret: string, handshake: boolean): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(request.headers as IncomingHttpHeaders)) {
    if (value === undefined) continue;
    if (!handshake && HOP_BY_HOP.has(name)) continue;
    headers[name] = value;
  }
  headers[NODE_SECRET_HEADER] = secret;
  const chain = request.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = chain === undefined || chain === '' ? request.ip : `${String(chain)}, ${request.ip}`;
  return headers;
}

export function unreachableBody(owner: NodeAddress, err: Error): ErrorBody {
  return {
    error: 'node_unreachable',
    message: `the instance runs on node ${owner.nodeId} (${owner.url}), which does not answer (${err.message}); retry: a node silent for ROOMKIT_NODE_LOST_AFTER_MS is declared lost and its rooms take new instances`,
    details: { node_id: owner.nodeId, node_url: owner.url },
  };
}

export function unreachable(reply: FastifyReply, owner: NodeAddress, err: Error): void {
  const text = JSON.stringify({ ...unreachableBody(owner, err), request_id: reply.request.id });
  reply.raw.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'retry-after': '2', 'x-request-id': reply.request.id });
  reply.raw.end(text);
}
