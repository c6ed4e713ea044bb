// A terminal in a room's instance over a WebSocket: the global WebSocket of browsers and
// Node 22+, or the one given to the client (RoomkitOptions.WebSocket, e.g. the `ws`
// package's on Node 18 and 20, which have no global one). Opening takes a single-use ticket with the API key first, since a browser
// cannot set the Authorization header on a WebSocket and a key must never travel in a
// URL; the ticket request also hears of refusals (no ready instance, the terminal limit)
// as ordinary API errors, which a WebSocket handshake cannot show.
import { RoomkitConnectionError, RoomkitError } from './errors.ts';
import type { RequestOptions, Transport } from './http.ts';
import { plainBytes } from './portable.ts';

const TERMINAL = '/api/profile/{profile_id}/room/{room_id}/terminal' as const;
/** WebSocket's readyState values (as numbers: a WebSocket given to the client may have no statics). */
const CONNECTING = 0;
const OPEN = 1;

/** A WHATWG WebSocket constructor: the global one, or a compatible one such as the `ws` package's. */
export type WebSocketConstructor = new (url: string) => WebSocket;

/** The WebSocket to use: the one given, else the global one; an error saying what to do when there is none. */
export function webSocketOf(given: WebSocketConstructor | undefined): WebSocketConstructor {
  const found = given ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (found) return found;
  const node = (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node;
  const version = node === undefined ? '' : ` (this is Node.js ${node})`;
  throw new RoomkitError({
    status: 0,
    code: 'feature_unavailable',
    message:
      `a terminal needs a WebSocket and this runtime has no global one${version}: use Node.js 22 or newer, ` +
      "or give the client one, e.g. new Roomkit({ WebSocket: (await import('ws')).WebSocket }) after npm install ws",
  });
}

export interface TerminalOptions extends RequestOptions {
  /** Size in character cells; default 80x24. */
  cols?: number;
  rows?: number;
  /** Run this with `sh -c` on the terminal instead of the login shell. */
  command?: string;
  /**
   * Attach again to this terminal (a TerminalClosedError's `terminalId`, after a pause of
   * its instance with memory): the same shell, its recent output replayed.
   */
  terminalId?: string;
}

/** Why the server ended a terminal other than by its program's exit. */
export type TerminalClosedReason = 'closed' | 'instance_stopped' | 'instance_paused' | 'idle' | 'shutting_down' | 'lost';

/** A terminal ended without its program's exit; `reason` says why. */
export class TerminalClosedError extends Error {
  readonly reason: TerminalClosedReason | 'connection_closed';
  /** The WebSocket's close code. */
  readonly closeCode: number;
  /** With reason `instance_paused`: the terminal to attach again to (`terminalId` of TerminalOptions) once the instance runs. */
  readonly terminalId: string | undefined;

  constructor(reason: TerminalClosedReason | 'connection_closed', message: string, closeCode: number, terminalId?: string) {
    super(message);
    this.name = 'TerminalClosedError';
    this.reason = reason;
    this.closeCode = closeCode;
    this.terminalId = terminalId;
  }
}

export class Terminal {
  readonly terminalId: string;
  readonly instanceId: string;
  /**
   * The exit code of the terminal's program. Rejects with TerminalClosedError when the
   * terminal ended otherwise: close() was called, its instance stopped, it was idle too
   * long, the server shut down or the connection broke.
   */
  readonly exited: Promise<number>;
  readonly #socket: WebSocket;
  readonly #listeners: ((data: Uint8Array) => void)[] = [];
  readonly #early: Uint8Array[] = [];
  readonly #encoder = new TextEncoder();

  constructor(socket: WebSocket, opened: { terminal_id: string; instance_id: string }) {
    this.#socket = socket;
    this.terminalId = opened.terminal_id;
    this.instanceId = opened.instance_id;
    let exitCode: number | undefined;
    let closedBy: { reason: TerminalClosedReason; message: string; terminalId?: string } | undefined;
    this.exited = new Promise<number>((resolve, reject) => {
      socket.addEventListener('message', (event) => {
        if (typeof event.data !== 'string') {
          const bytes = new Uint8Array(event.data as ArrayBuffer);
          if (this.#listeners.length === 0) this.#early.push(bytes);
          for (const listener of this.#listeners) listener(bytes);
          return;
        }
        const message = parseMessage(event.data);
        if (message.type === 'exit' && typeof message.exit_code === 'number') exitCode = message.exit_code;
        if (message.type === 'closed') {
          closedBy = {
            reason: message.reason as TerminalClosedReason,
            message: String(message.message ?? message.reason),
            ...(typeof message.terminal_id === 'string' ? { terminalId: message.terminal_id } : {}),
          };
        }
      });
      socket.addEventListener('close', (event) => {
        if (exitCode !== undefined) return resolve(exitCode);
        if (closedBy) return reject(new TerminalClosedError(closedBy.reason, `the terminal was closed: ${closedBy.message}`, event.code, closedBy.terminalId));
        reject(new TerminalClosedError('connection_closed', `the terminal's connection closed (WebSocket code ${event.code}${event.reason ? `: ${event.reason}` : ''})`, event.code));
      });
    });
    // A caller that never awaits `exited` must not get an unhandled rejection.
    this.exited.catch(() => {});
  }

  /** The terminal's output as it comes; what came before the first listener is given to it. */
  onData(listener: (data: Uint8Array) => void): void {
    this.#listeners.push(listener);
    for (const chunk of this.#early.splice(0)) listener(chunk);
  }

  /** Input, as the terminal's keyboard would type it (a string is sent as UTF-8). */
  write(data: string | Uint8Array): void {
    if (this.#socket.readyState !== OPEN) return;
    this.#socket.send(typeof data === 'string' ? this.#encoder.encode(data) : plainBytes(data));
  }

  resize(cols: number, rows: number): void {
    if (this.#socket.readyState !== OPEN) return;
    this.#socket.send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  /** Ends the terminal and everything it started in the instance. */
  close(): void {
    if (this.#socket.readyState === OPEN || this.#socket.readyState === CONNECTING) this.#socket.close(1000);
  }
}

/** Opens a terminal in a room: a ticket over HTTP, then the WebSocket. */
export async function openTerminal(
  transport: Transport,
  params: { profile_id: string; room_id: string },
  options: TerminalOptions = {},
  WebSocketImpl?: WebSocketConstructor,
): Promise<Terminal> {
  // Refused before a ticket is taken: without a WebSocket it could not be used.
  const Socket = webSocketOf(WebSocketImpl);
  const { ticket } = await transport.json('post', `${TERMINAL}/ticket`, { params }, { ...(options.signal ? { signal: options.signal } : {}) });
  const query = { cols: options.cols, rows: options.rows, command: options.command, terminal_id: options.terminalId, ticket };
  const url = transport.url(TERMINAL, params, query).replace(/^http/, 'ws');
  const shown = url.replace(/ticket=[^&]*/, 'ticket=…');
  const socket = new Socket(url);
  socket.binaryType = 'arraybuffer';
  return new Promise<Terminal>((resolve, reject) => {
    let settled = false;
    const onAbort = () => socket.close();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    socket.addEventListener('message', function first(event) {
      if (settled || typeof event.data !== 'string') return;
      const message = parseMessage(event.data);
      if (message.type !== 'opened') return;
      settled = true;
      socket.removeEventListener('message', first);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(new Terminal(socket, message as { terminal_id: string; instance_id: string }));
    });
    socket.addEventListener('close', (event) => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener('abort', onAbort);
      if (options.signal?.aborted) return reject(options.signal.reason);
      if (event.code === 1006) {
        // The handshake was refused (the ticket's checks passed, so most likely the
        // instance cannot have terminals), or the server could not be reached.
        return reject(
          new RoomkitError({
            status: 0,
            code: 'feature_unavailable',
            message: `the server did not open the terminal at ${shown}: the room's instance may run without roomkit's agent (see GET of the room), or the connection failed`,
          }),
        );
      }
      reject(new RoomkitConnectionError({ code: 'connection_failed', message: `the terminal closed before it opened (WebSocket code ${event.code}${event.reason ? `: ${event.reason}` : ''})`, method: 'GET', url: shown }));
    });
  });
}

function parseMessage(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
