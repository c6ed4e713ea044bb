// Carries one request to a port inside an instance and its answer back, both streamed
// (no body is held whole): plain HTTP through node:http, and WebSocket (or any other
// `Upgrade:`) handshakes as a byte tunnel once the upstream connection is open, so the
// program in the instance negotiates its own protocol and extensions. Hop-by-hop
// headers are dropped both ways, X-Forwarded-* are set, and a roomkit API key never
// reaches the instance. Refusals before the first byte of an answer (nothing listening,
// no answer in time) are Error bodies; a failure after it ends the connection.
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { PortConnection, PortTarget } from '../../core/ports.ts';
import { AppError } from '../../errors.ts';
import { SESSION_COOKIE } from '../../http/session-cookie.ts';

export interface ProxyOptions {
  target: PortTarget;
  connection: PortConnection;
  /** Path and query to ask the instance for, from its leading slash. */
  upstreamPath: string;
  /**
   * `all`: the request's Authorization header carried the API key and is never passed
   * on; `keys`: it is passed on unless it holds a roomkit key.
   */
  dropAuthorization: 'all' | 'keys';
  /** A cookie of roomkit's own, removed from the request's Cookie header. */
  dropCookie?: string;
  /** The path the instance's root is reached under, as X-Forwarded-Prefix. */
  prefix?: string;
  /**
   * The answer is served on roomkit's own origin: a sandboxing CSP gives its pages an
   * origin of their own, so their scripts cannot act as the API's pages.
   */
  sandbox: boolean;
  timeoutMs: number;
  idleTimeoutMs: number;
}

/** Headers that describe one connection, not the message: never forwarded (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const FORWARDED = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-prefix', 'forwarded'];
const ROOMKIT_KEY = /^\s*bearer\s+rk_(?:live|test)_/i;
/**
 * How long a connection to the port may take to be accepted. An attempt that gets no
 * answer at all (a full accept queue, an instance whose network stopped answering) would
 * otherwise hold the request through every SYN retry until the whole timeout.
 */
const CONNECT_TIMEOUT_MS = 5_000;
/** Sandboxed, but a page may still run its scripts, submit forms and open windows. */
const SANDBOX_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads';

/** Whether a request asks to switch protocols (a WebSocket handshake). */
export function isUpgrade(request: FastifyRequest): boolean {
  return typeof request.headers.upgrade === 'string' && /\bupgrade\b/i.test(String(request.headers.connection ?? ''));
}

/** Forwards an HTTP request and streams the answer through the reply. */
export async function proxyHttp(request: FastifyRequest, reply: FastifyReply, options: ProxyOptions): Promise<FastifyReply> {
  const { target, connection } = options;
  const upstream = httpRequest({
    host: target.host,
    port: target.port,
    method: request.method,
    path: options.upstreamPath,
    headers: forwardHeaders(request, options, false),
    setHost: false,
    agent: false,
  });
  const abort = (err?: Error) => upstream.destroy(err);
  connection.onInstanceStopping(() => abort(new Error('the instance stopped')));
  reply.raw.once('close', () => {
    connection.release();
    abort();
  });
  upstream.setTimeout(options.idleTimeoutMs, () => abort(new IdleTimeout()));

  const answer = new Promise<IncomingMessage>((resolve, reject) => {
    const timer = setTimeout(() => reject(timedOut(target, options.timeoutMs)), options.timeoutMs);
    const connectTimer = setTimeout(() => reject(notAccepted(target)), Math.min(CONNECT_TIMEOUT_MS, options.timeoutMs));
    upstream.once('socket', (socket) => socket.once('connect', () => clearTimeout(connectTimer)));
    upstream.once('response', (res) => {
      clearTimeout(timer);
      clearTimeout(connectTimer);
      resolve(res);
    });
    upstream.once('error', (err) => {
      clearTimeout(timer);
      clearTimeout(connectTimer);
      reject(connectFailure(err, target));
    });
  });
  request.raw.pipe(upstream);
  let res: IncomingMessage;
  try {
    res = await answer;
  } catch (err) {
    abort();
    throw err;
  }
  // After the first byte of the answer, a failure can only end the connection.
  upstream.on('error', () => {});
  reply.code(res.statusCode ?? 502);
  for (const [name, value] of Object.entries(answerHeaders(res.headers))) if (value !== undefined) reply.header(name, value);
  if (options.sandbox) reply.header('Content-Security-Policy', SANDBOX_CSP);
  return reply.send(res);
}

/**
 * Opens a connection to the port and, once it is open, hands the client's socket over
 * to a tunnel: the handshake goes on as the client sent it (less what is roomkit's),
 * and the instance's answer, 101 or not, comes back as it is. Rejects, before the
 * client's socket is touched, when the port cannot be reached.
 */
export async function proxyUpgrade(request: FastifyRequest, reply: FastifyReply, options: ProxyOptions): Promise<void> {
  const { target, connection } = options;
  let upstream: Socket;
  try {
    upstream = await openSocket(target, options.timeoutMs);
  } catch (err) {
    connection.release();
    throw err;
  }
  reply.hijack();
  const client = request.raw.socket;
  const close = () => {
    upstream.destroy();
    client.destroy();
  };
  upstream.once('close', close);
  client.once('close', close);
  upstream.on('error', close);
  client.on('error', close);
  upstream.once('close', () => connection.release());
  connection.onInstanceStopping(close);
  upstream.setTimeout(options.idleTimeoutMs, close);
  client.setTimeout(options.idleTimeoutMs, close);
  upstream.setNoDelay(true);
  client.setNoDelay(true);

  const headers = forwardHeaders(request, options, true);
  const lines = [`${request.method} ${options.upstreamPath} HTTP/1.1`];
  for (const [name, value] of Object.entries(headers)) {
    for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined) lines.push(`${name}: ${String(one).replace(/[\r\n]/g, '')}`);
  }
  upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
  const head = upgradeHead(request);
  if (head.length > 0) upstream.write(head);
  upstream.pipe(client);
  client.pipe(upstream);
}

/** The request's headers as the instance gets them. */
function forwardHeaders(request: FastifyRequest, options: ProxyOptions, upgrade: boolean): OutgoingHttpHeaders {
  const incoming = request.raw.headers;
  const named = new Set(
    String(incoming.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter((t) => t !== '' && t !== 'upgrade'),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name) || FORWARDED.includes(name)) continue;
    if (name === 'authorization' && (options.dropAuthorization === 'all' || ROOMKIT_KEY.test(String(value)))) continue;
    // The console's session cookie is sent to every path of its host, signed port URLs
    // included: it is roomkit's, never the program's.
    if (name === 'cookie') {
      const kept = withoutCookies(String(value), options.dropCookie === undefined ? [SESSION_COOKIE] : [SESSION_COOKIE, options.dropCookie]);
      if (kept !== '') out.cookie = kept;
      continue;
    }
    out[name] = value;
  }
  if (upgrade) {
    out.connection = 'Upgrade';
    out.upgrade = incoming.upgrade;
  }
  // Each proxy adds the address it was reached from; what a client that is not a
  // trusted proxy claims is dropped.
  const peer = request.raw.socket.remoteAddress ?? '';
  const trustedChain = request.ip !== peer ? String(incoming['x-forwarded-for'] ?? '') : '';
  out['x-forwarded-for'] = trustedChain === '' ? peer : `${trustedChain}, ${peer}`;
  out['x-forwarded-proto'] = request.protocol;
  out['x-forwarded-host'] = request.host;
  if (options.prefix !== undefined) out['x-forwarded-prefix'] = options.prefix;
  return out;
}

/** The answer's headers as the client gets them. */
function answerHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase()),
  );
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name) && !named.has(name)));
}

/** The Cookie header less these cookies; as it came when it has none of them. */
function withoutCookies(header: string, names: readonly string[]): string {
  const cookies = header.split(';').map((c) => c.trim());
  if (!cookies.some((c) => names.includes(c.split('=')[0]?.trim() ?? ''))) return header;
  return cookies.filter((c) => c !== '' && !names.includes(c.split('=')[0]?.trim() ?? '')).join('; ');
}

/** What the client sent after its handshake, before the answer (kept by the WebSocket plugin). */
function upgradeHead(request: FastifyRequest): Buffer {
  const raw = request.raw as unknown as Record<symbol, unknown>;
  const symbol = Object.getOwnPropertySymbols(raw).find((s) => s.description === 'ws-head');
  const head = symbol === undefined ? undefined : raw[symbol];
  return Buffer.isBuffer(head) ? head : Buffer.alloc(0);
}

function openSocket(target: PortTarget, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: target.host, port: target.port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(notAccepted(target));
    }, Math.min(CONNECT_TIMEOUT_MS, timeoutMs));
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(connectFailure(err, target));
    });
  });
}

class IdleTimeout extends Error {}

function timedOut(target: PortTarget, timeoutMs: number): AppError {
  return new AppError(
    'port_timeout',
    `the program on port ${target.port} of the instance did not answer within ${timeoutMs / 1000} s (ROOMKIT_PORT_PROXY_TIMEOUT_S)`,
    { port: target.port, timeout_s: timeoutMs / 1000 },
  );
}

function notAccepted(target: PortTarget): AppError {
  return new AppError(
    'port_not_listening',
    `port ${target.port} of the instance did not accept a connection within ${CONNECT_TIMEOUT_MS / 1000} s: is a server listening there, on all addresses (0.0.0.0:${target.port}), ` +
      'and taking connections (its accept queue full)?',
    { port: target.port },
  );
}

function connectFailure(err: Error, target: PortTarget): AppError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') {
    return new AppError(
      'port_not_listening',
      `nothing listens on port ${target.port} of the instance: start your server there on all addresses (0.0.0.0:${target.port}, e.g. \`python3 -m http.server ${target.port}\` as a background command), ` +
        'not only on 127.0.0.1, which only the instance itself reaches',
      { port: target.port },
    );
  }
  if (err instanceof IdleTimeout) {
    return new AppError('port_timeout', `the program on port ${target.port} of the instance sent nothing for too long (ROOMKIT_PORT_PROXY_IDLE_TIMEOUT_S)`, { port: target.port });
  }
  return new AppError('port_connection_failed', `the connection to port ${target.port} of the instance ended before an answer (${code ?? err.message}): is the program there an HTTP server?`, {
    port: target.port,
  });
}
