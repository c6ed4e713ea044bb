// A create sent to one node of a shared store may start its instance on another: the
// node that answers ranks the live nodes (core/placement.ts) and, when another node
// ranks first, sends the create there with the nodes' shared secret, so that node makes
// the instance without placing it again. A node that answers 503 capacity_exhausted
// (its own admission, the check that commits) or does not answer is passed over for
// the next one, this node included (reached at its own address, like any other); the
// last answer is the client's. When this node ranks first, the create goes on here
// untouched.
//
// Its answer says how long deciding took (`Server-Timing: placement;dur=MS`).
//
// The create's body is read here only when it is sent elsewhere (a create's body is a
// small JSON object: bounded by BODY_LIMIT), and only to learn a snapshot it starts
// from (whose files one node keeps) and to send it again on a retry.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { placementFor, type PlacementCandidate } from '../core/placement.ts';
import type { Services } from '../services.ts';
import { agents, CONNECT_TIMEOUT_MS, headersFor, HOP_BY_HOP, unreachable, type NodeAddress } from './node-requests.ts';

/** The most of a create's body read here; a larger one is answered where it arrived (and refused there). */
const BODY_LIMIT = 1024 * 1024;

/** Sends the create to the node placement chose when that is another node; false when it is answered here. */
export async function placeCreate(services: Services, request: FastifyRequest, reply: FastifyReply, secret: string, room: { profileId: string; roomId: string }): Promise<boolean> {
  const lostAfterMs = services.config.nodeLostAfterMs;
  const started = performance.now();
  let ranked = await placementFor({ db: services.db, profileId: room.profileId, roomId: room.roomId, lostAfterMs });
  if (ranked.length === 0 || ranked[0]!.nodeId === services.nodeId) {
    const ms = performance.now() - started;
    services.metrics.placementDecided('here', ms / 1000);
    reply.header('server-timing', timing(ms));
    return false;
  }
  if (Number(request.headers['content-length'] ?? 0) > BODY_LIMIT) return false;
  reply.hijack();
  const body = await readBody(request);
  const snapshotId = snapshotOf(body);
  if (snapshotId !== undefined) ranked = await placementFor({ db: services.db, profileId: room.profileId, roomId: room.roomId, lostAfterMs, snapshotId });
  const decidedMs = performance.now() - started;
  services.metrics.placementDecided('elsewhere', decidedMs / 1000);
  const candidates = ranked.length > 0 ? ranked : [{ nodeId: services.nodeId, url: selfUrl(services) } as PlacementCandidate];
  let lastError: { node: NodeAddress; err: Error } | undefined;
  for (const [i, node] of candidates.entries()) {
    const last = i === candidates.length - 1;
    try {
      const answer = await send(request, node, secret, body);
      if (!last && answer.statusCode === 503 && (await refusedForCapacity(answer))) {
        request.log.info({ nodeId: node.nodeId }, 'placement: the node had no room; trying the next');
        continue;
      }
      request.log.debug({ nodeId: node.nodeId }, 'placement: created on another node');
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      headers['server-timing'] = timing(decidedMs);
      reply.raw.writeHead(answer.statusCode ?? 502, headers);
      answer.pipe(reply.raw);
      return true;
    } catch (err) {
      lastError = { node, err: err as Error };
      request.log.warn({ err, nodeId: node.nodeId }, 'placement: the node did not answer; trying the next');
    }
  }
  unreachable(reply, lastError!.node, lastError!.err);
  return true;
}

/** How long the decision took, as a Server-Timing entry (the create's answer carries it). */
function timing(ms: number): string {
  return `placement;dur=${ms.toFixed(2)}`;
}

function selfUrl(services: Services): string {
  return services.nodes?.url ?? `http://127.0.0.1:${services.config.port}`;
}

async function readBody(request: FastifyRequest): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT) break;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function snapshotOf(body: Buffer): string | undefined {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { snapshot_id?: unknown };
    return typeof parsed.snapshot_id === 'string' ? parsed.snapshot_id : undefined;
  } catch {
    return undefined; // Refused by the node that makes it, as anywhere.
  }
}

/** Whether a 503 says the node's host had no room (then another may); its body is read and dropped. */
async function refusedForCapacity(answer: IncomingMessage): Promise<boolean> {
  const chunks: Buffer[] = [];
  for await (const chunk of answer) chunks.push(chunk as Buffer);
  try {
    return (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: string }).error === 'capacity_exhausted';
  } catch {
    return false;
  }
}

function send(request: FastifyRequest, node: NodeAddress, secret: string, body: Buffer): Promise<IncomingMessage> {
  const target = new URL(node.url);
  const https = target.protocol === 'https:';
  const headers = headersFor(request, secret, false);
  headers['content-length'] = body.length;
  return new Promise((resolve, reject) => {
    const upstream = (https ? httpsRequest : httpRequest)({
      host: target.hostname,
      port: target.port === '' ? (https ? 443 : 80) : Number(target.port),
      method: 'POST',
      path: request.originalUrl,
      headers,
      agent: https ? agents.https : agents.http,
    });
    const timer = setTimeout(() => upstream.destroy(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
    upstream.once('socket', (socket) => {
      if (!socket.connecting) clearTimeout(timer);
      else socket.once(https ? 'secureConnect' : 'connect', () => clearTimeout(timer));
    });
    upstream.once('response', (answer) => {
      clearTimeout(timer);
      resolve(answer);
    });
    upstream.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    upstream.end(body);
  });
}
