// A terminal in a room's instance over a WebSocket (GET …/terminal), and the tickets that
// let a browser open one without the Authorization header (POST …/terminal/ticket).
// The terminal is opened before the upgrade, so every refusal is an ordinary HTTP Error
// body; after it, binary frames carry the terminal's bytes both ways and text frames
// carry JSON control messages (docs/api.md, "Terminals").
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import type {} from '@fastify/websocket';
import type { WebSocket } from 'ws';
import { TICKET_TTL_MS } from '../../../core/terminal-tickets.ts';
import { MAX_TERMINAL_COMMAND_BYTES, type Terminal, type TerminalEnd, type TerminalEndReason, TERMINAL_SIZE } from '../../../core/terminals.ts';
import { AppError } from '../../../errors.ts';
import type { Services } from '../../../services.ts';
import { auditUpgraded } from '../../../http/audit.ts';
import { callerOf } from '../../../http/auth.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import type { App } from '../../../http/types.ts';
import { restMessage } from '../hint-wording.ts';

const TERMINAL_PATH = '/api/profile/:profile_id/room/:room_id/terminal';
/** Largest message a client may send (input or control). */
export const MAX_TERMINAL_MESSAGE_BYTES = 1024 * 1024;
/** Output waiting to be sent to a client beyond which the terminal is paused, and where it resumes. */
const OUTPUT_HIGH_WATER_BYTES = 1024 * 1024;
const OUTPUT_LOW_WATER_BYTES = 256 * 1024;
/** A client that answers no ping within this is taken as gone. */
const PING_INTERVAL_MS = 30_000;

/** The WebSocket close code of each way a terminal ends other than its program's exit (1000). */
export const CLOSE_CODES: Readonly<Record<TerminalEndReason, number>> = {
  closed: 1000,
  shutting_down: 1001,
  lost: 1011,
  instance_stopped: 4001,
  idle: 4002,
  instance_paused: 4003,
};

declare module 'fastify' {
  interface FastifyRequest {
    /** The terminal a WebSocket request opened before its upgrade. */
    terminal?: Terminal;
  }
}

const size = (what: string, min: number, max: number, fallback: number) =>
  Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$', description: `${what}, ${min}-${max}; default ${fallback}` }));

const TerminalQuery = Type.Object(
  {
    cols: size('Columns', TERMINAL_SIZE.minCols, TERMINAL_SIZE.maxCols, TERMINAL_SIZE.defaultCols),
    rows: size('Rows', TERMINAL_SIZE.minRows, TERMINAL_SIZE.maxRows, TERMINAL_SIZE.defaultRows),
    command: Type.Optional(
      Type.String({ minLength: 1, maxLength: MAX_TERMINAL_COMMAND_BYTES, description: 'Run this with `sh -c` on the terminal instead of the login shell' }),
    ),
    ticket: Type.Optional(Type.String({ maxLength: 128, description: 'A ticket from POST …/terminal/ticket, in place of the Authorization header' })),
    terminal_id: Type.Optional(
      Type.String({
        format: 'uuid',
        description:
          'Attach again to this terminal, closed with reason `instance_paused` when its instance was paused with its memory: the same shell, its recent output replayed (resumes the instance first, as any terminal request does)',
      }),
    ),
  },
  { additionalProperties: false },
);

const TerminalTicket = Type.Object(
  {
    ticket: Type.String({ description: 'Give it as ?ticket= on GET …/terminal of this room, once' }),
    expires_at: Type.String({ format: 'date-time', description: `When it can no longer be used (${TICKET_TTL_MS / 1000} s after it was made)` }),
  },
  { title: 'TerminalTicket' },
);

export function terminalRoutes(app: App, { terminals, terminalTickets, audit }: Services): void {
  app.post(
    `${TERMINAL_PATH}/ticket`,
    {
      config: { auditAction: 'terminal.ticket' },
      schema: {
        operationId: 'createTerminalTicket',
        summary: 'Get a ticket to open a terminal',
        description:
          'For clients that cannot set the Authorization header on a WebSocket (browsers): answers a ticket that opens ' +
          `one terminal in this room with GET …/terminal?ticket=…, within ${TICKET_TTL_MS / 1000} s, on behalf of this key. ` +
          'Refuses as opening would when the room has no ready instance or its terminal limit is reached, since a WebSocket client sees no HTTP answer.',
        tags: ['terminals'],
        params: RoomParams,
        response: { 201: TerminalTicket, ...errorResponses(400, 401, 404, 409, 429, 503) },
      },
    },
    async (request, reply) => {
      const { profile_id, room_id } = request.params;
      const caller = callerOf(request);
      await terminals.precheck(caller.organizationId, profile_id, room_id);
      const { ticket, expiresAt } = terminalTickets.issue(caller, profile_id, room_id);
      return reply.code(201).send({ ticket, expires_at: expiresAt });
    },
  );

  app.route({
    method: 'GET',
    url: TERMINAL_PATH,
    config: {
      auditAction: 'terminal.open',
      ticketAuth: true,
      documentedResponses: { 101: { description: 'Switching Protocols: the WebSocket is open; its first text frame is {"type": "opened", "terminal_id", "instance_id"}' } },
    },
    schema: {
      operationId: 'openTerminal',
      summary: 'Open a terminal (WebSocket)',
      description:
        'Upgrades to a WebSocket carrying a terminal in the room\'s instance: the login shell of the profile\'s user, ' +
        'or `command`. Binary frames are the terminal\'s bytes both ways; text frames are JSON control messages ' +
        '(the API reference, "Terminals"). Refusals come before the upgrade, as HTTP Error bodies; a request without ' +
        '`Upgrade: websocket` is answered 426 once the room is found.',
      tags: ['terminals'],
      params: RoomParams,
      querystring: TerminalQuery,
      response: errorResponses(400, 401, 404, 409, 426, 429, 503),
    },
    // Opened before the upgrade, so a refusal is an HTTP answer with an Error body.
    preHandler: async (request) => {
      if (!request.ws) return;
      const { profile_id, room_id } = request.params;
      const { cols, rows, command, terminal_id } = request.query;
      const terminal = await terminals.open(callerOf(request).organizationId, profile_id, room_id, {
        ...(cols === undefined ? {} : { cols: Number(cols) }),
        ...(rows === undefined ? {} : { rows: Number(rows) }),
        ...(command === undefined ? {} : { command }),
        ...(terminal_id === undefined ? {} : { terminalId: terminal_id }),
      });
      request.terminal = terminal;
      // Whatever happens to the upgrade, the terminal ends with its connection.
      request.raw.socket.once('close', () => terminal.close());
    },
    wsHandler: (socket, request) => {
      const terminal = request.terminal;
      if (!terminal) throw new Error('a terminal WebSocket was upgraded without its terminal');
      auditUpgraded(request, audit, { instance_id: terminal.instanceId });
      carry(socket, terminal, request);
    },
    // A plain GET: another organization's room is a 404 as anywhere else; then 426.
    handler: async (request) => {
      const { profile_id, room_id } = request.params;
      await terminals.precheck(callerOf(request).organizationId, profile_id, room_id);
      throw new AppError('upgrade_required', 'this endpoint is a WebSocket: connect with a WebSocket client (Upgrade: websocket)');
    },
  });
}

/** Carries a terminal over a WebSocket until one of them ends. */
function carry(socket: WebSocket, terminal: Terminal, request: FastifyRequest): void {
  const sendJson = (message: Record<string, unknown>) => {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(message));
  };
  sendJson({ type: 'opened', terminal_id: terminal.id, instance_id: terminal.instanceId });

  // Output, with backpressure: past the high-water mark the terminal is paused until
  // the client has taken most of it.
  let unsent = 0;
  let paused = false;
  terminal.onOutput((chunk) => {
    if (socket.readyState !== socket.OPEN) return;
    unsent += chunk.length;
    socket.send(chunk, { binary: true }, () => {
      unsent -= chunk.length;
      if (paused && unsent <= OUTPUT_LOW_WATER_BYTES) {
        paused = false;
        terminal.resume();
      }
    });
    if (!paused && unsent > OUTPUT_HIGH_WATER_BYTES) {
      paused = true;
      terminal.pause();
    }
  });

  socket.on('message', (data, isBinary) => {
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (isBinary) return terminal.write(bytes);
    const problem = control(terminal, bytes);
    if (problem) sendJson({ type: 'error', error: 'validation_error', message: problem });
  });

  let alive = true;
  socket.on('pong', () => (alive = true));
  const ping = setInterval(() => {
    if (!alive) return socket.terminate();
    alive = false;
    socket.ping();
  }, PING_INTERVAL_MS);
  ping.unref();

  socket.on('close', () => {
    clearInterval(ping);
    terminal.close();
  });
  socket.on('error', (err) => request.log.warn({ err, terminalId: terminal.id }, 'terminal WebSocket failed'));

  void terminal.ended.then((end: TerminalEnd) => {
    clearInterval(ping);
    if (socket.readyState !== socket.OPEN) return;
    if (end.kind === 'exit') {
      sendJson({ type: 'exit', exit_code: end.exitCode });
      socket.close(1000, 'exited');
      return;
    }
    if (end.reason === 'closed') return socket.close(CLOSE_CODES.closed);
    // A terminal let go at a pause says which one to attach again to (?terminal_id=).
    sendJson({ type: 'closed', reason: end.reason, message: end.message, ...(end.reason === 'instance_paused' ? { terminal_id: terminal.id } : {}) });
    socket.close(CLOSE_CODES[end.reason], end.reason);
  });
}

/** Applies a text (control) message; answers what was wrong with it, if anything. */
function control(terminal: Terminal, bytes: Buffer): string | undefined {
  let message: unknown;
  try {
    message = JSON.parse(bytes.toString('utf8'));
  } catch {
    return 'a text message must be JSON, e.g. {"type":"resize","cols":120,"rows":40}; send terminal input as binary messages';
  }
  const m = (message ?? {}) as Record<string, unknown>;
  if (m.type === 'resize') {
    try {
      terminal.resize(Number(m.cols), Number(m.rows));
    } catch (err) {
      return err instanceof AppError ? restMessage(err) : (err as Error).message;
    }
    return undefined;
  }
  return `unknown control message type ${JSON.stringify(m.type)}; the one a client sends is "resize"`;
}
