// Talking to roomkit's agent inside an instance: one TCP connection per operation to
// the instance's address, opened with the instance's key. A runtime that boots its
// instances with the agent (images/guest/agent) reaches them through it alone; an agent
// that cannot be reached, or does not take the request, is AgentUnavailable (nothing ran).
import { connect, type Socket } from 'node:net';
import { encodeFrame, type Frame, FrameDecoder, FRAME, type FrameType } from './frames.ts';
import { AGENT_PROTOCOL, type FailureKind, type OperationName, type ReplyOf, type RequestOf } from './protocol.ts';

/** Where an instance's agent listens, and the key it wants. */
export interface AgentEndpoint {
  host: string;
  port: number;
  key: string;
}

/** The agent's port inside every instance. */
export const AGENT_PORT = AGENT_PROTOCOL.constants.port;

/**
 * How long a connection to the agent may take before it counts as not answering: long
 * enough for a SYN the guest's own network stack drops to be sent again (1 s, then 3 s
 * later), as happened with 20 instances booting at once on 2 cores.
 */
const CONNECT_TIMEOUT_MS = 10_000;
/**
 * How long a refused connection is tried again: the agent's init starts its server
 * again within a few hundred milliseconds when it ends (images/guest/agent/init.go).
 */
const REFUSED_RETRY_MS = 3_000;
/** How long the agent may take to answer a request (every operation answers at once, before its work's output). */
const ANSWER_TIMEOUT_MS = 15_000;

/** The agent could not be reached, or did not take the request: nothing ran. */
export class AgentUnavailable extends Error {}

/** A failure the agent reported for an operation (a kind of the protocol's failures, or what an unknown one said). */
export class AgentFailure extends Error {
  readonly kind: FailureKind | (string & {});
  constructor(kind: string, message: string) {
    super(message);
    this.name = 'AgentFailure';
    this.kind = kind;
  }
}

/** One operation's connection: the frames the agent sends, and a way to send more. */
export class AgentChannel {
  private readonly socket: Socket;
  private readonly queue: Frame[] = [];
  private waiting: ((frame: Frame | null) => void) | undefined;
  private closed = false;
  private failure: Error | undefined;

  constructor(socket: Socket) {
    this.socket = socket;
    const decoder = new FrameDecoder();
    socket.on('data', (chunk: Buffer) => {
      let frames: Frame[];
      try {
        frames = decoder.push(chunk);
      } catch (err) {
        this.failure = err as Error;
        socket.destroy();
        return;
      }
      for (const frame of frames) this.deliver(frame);
    });
    socket.on('error', (err) => (this.failure ??= err));
    socket.on('close', () => {
      this.closed = true;
      this.deliver(null);
    });
  }

  private deliver(frame: Frame | null): void {
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = undefined;
      waiting(frame);
    } else if (frame) {
      this.queue.push(frame);
    }
  }

  /** The next frame, or null once the connection has closed. */
  next(): Promise<Frame | null> {
    const frame = this.queue.shift();
    if (frame) return Promise.resolve(frame);
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  /** Why the connection ended, when it was not a clean close. */
  get error(): Error | undefined {
    return this.failure;
  }

  /** Whether frames can still be sent (the connection has not closed). */
  get isOpen(): boolean {
    return !this.closed && !this.socket.destroyed;
  }

  /** Sends a frame; false when the connection has closed, or (as a stream's write) when its buffer is full. */
  send(type: FrameType, payload?: Buffer | string | object): boolean {
    if (this.closed || this.socket.destroyed) return false;
    return this.socket.write(encodeFrame(type, payload));
  }

  /** Resolves once what was sent so far has left (backpressure for large inputs). */
  drained(): Promise<void> {
    if (!this.socket.writableNeedDrain || this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  /** Stops reading frames until resume(): the agent's writes then wait, and with them what it reads from. */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  close(): void {
    this.socket.destroy();
  }
}

/**
 * Opens a connection, sends the request and waits for the agent's first answer: a
 * reply (returned with the open channel) or a failure (thrown as AgentFailure). A
 * connection that cannot be made, or closes before any answer, is AgentUnavailable.
 */
export async function agentRequest<Op extends OperationName>(endpoint: AgentEndpoint, request: { op: Op } & RequestOf<Op>): Promise<{ channel: AgentChannel; reply: ReplyOf<Op> }> {
  const socket = await connectTo(endpoint);
  const channel = new AgentChannel(socket);
  channel.send(FRAME.request, { ...request, key: endpoint.key });
  let timer: NodeJS.Timeout | undefined;
  const silent = new Promise<'silent'>((resolve) => (timer = setTimeout(() => resolve('silent'), ANSWER_TIMEOUT_MS)));
  const first = await Promise.race([channel.next(), silent]).finally(() => clearTimeout(timer));
  if (first === 'silent') {
    channel.close();
    throw new AgentUnavailable(`the instance's agent took the connection but did not answer within ${ANSWER_TIMEOUT_MS / 1000} s`);
  }
  if (first === null) {
    channel.close();
    throw new AgentUnavailable(`the instance's agent closed the connection without answering${channel.error ? `: ${channel.error.message}` : ''}`);
  }
  const body = parseJson(first.payload);
  if (first.type === FRAME.fail) {
    channel.close();
    throw new AgentFailure(String(body.kind ?? 'error'), String(body.message ?? 'the agent refused the operation'));
  }
  if (first.type !== FRAME.reply) {
    channel.close();
    throw new Error(`the instance's agent answered with an unexpected frame ${JSON.stringify(first.type)}`);
  }
  return { channel, reply: body as ReplyOf<Op> };
}

/** The open connections to each agent address, so that the end of its sandbox can end them. */
const openConnections = new Map<string, Set<Socket>>();

function track(host: string, socket: Socket): void {
  let sockets = openConnections.get(host);
  if (!sockets) openConnections.set(host, (sockets = new Set()));
  sockets.add(socket);
  socket.once('close', () => {
    sockets.delete(socket);
    if (sockets.size === 0 && openConnections.get(host) === sockets) openConnections.delete(host);
  });
}

/**
 * Ends every open connection to the agent at `host`, as if the agent had reset them,
 * and says how many there were. A runtime whose instances have their network stack
 * inside the sandbox (gVisor's) calls it when a sandbox stops or ends: nothing is left
 * to close the sandbox's side, so the host's side would otherwise wait forever for an
 * answer, where a stack in the host's kernel would have reset them.
 */
export function endAgentConnections(host: string): number {
  const sockets = [...(openConnections.get(host) ?? [])];
  for (const socket of sockets) {
    socket.destroy(Object.assign(new Error(`the connection to the instance's agent was reset: its sandbox ended`), { code: 'ECONNRESET' }));
  }
  return sockets.length;
}

/**
 * The connections to the agent at `host` open now, to be ended later (as
 * endAgentConnections ends them) should they still be open then, leaving those made
 * meanwhile: for a snapshot with memory, whose checkpoint drops the ones open before it
 * while the sandbox goes on. Answers how many it ended.
 */
export function agentConnectionsNow(host: string): () => number {
  const sockets = [...(openConnections.get(host) ?? [])];
  return () => {
    let ended = 0;
    for (const socket of sockets) {
      if (socket.destroyed) continue;
      socket.destroy(Object.assign(new Error("the connection to the instance's agent was dropped by its snapshot"), { code: 'ECONNRESET' }));
      ended++;
    }
    return ended;
  };
}

/** How many connections to the agent at this address are open now (a frozen instance must have none). */
export function openAgentConnections(host: string): number {
  return openConnections.get(host)?.size ?? 0;
}

/** A connection to the agent; a refused one is tried again for a moment (its server may be restarting). */
async function connectTo(endpoint: AgentEndpoint): Promise<Socket> {
  const giveUp = Date.now() + REFUSED_RETRY_MS;
  for (;;) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect({ host: endpoint.host, port: endpoint.port, noDelay: true });
        const timer = setTimeout(() => {
          s.destroy();
          reject(new AgentUnavailable(`the instance's agent did not answer within ${CONNECT_TIMEOUT_MS} ms`));
        }, CONNECT_TIMEOUT_MS);
        s.once('connect', () => {
          clearTimeout(timer);
          track(endpoint.host, s);
          resolve(s);
        });
        s.once('error', (err: NodeJS.ErrnoException) => {
          clearTimeout(timer);
          reject(Object.assign(new AgentUnavailable(`cannot reach the instance's agent: ${err.message}`), { refused: err.code === 'ECONNREFUSED' }));
        });
      });
    } catch (err) {
      if (!(err as { refused?: boolean }).refused || Date.now() > giveUp) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** A one-shot operation: its reply, the connection closed. */
export async function agentCall<Op extends OperationName>(endpoint: AgentEndpoint, request: { op: Op } & RequestOf<Op>): Promise<ReplyOf<Op>> {
  const { channel, reply } = await agentRequest(endpoint, request);
  channel.close();
  return reply;
}

export function parseJson(payload: Buffer): Record<string, unknown> {
  try {
    const value = JSON.parse(payload.toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
