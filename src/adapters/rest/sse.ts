// Streams a running command to the client as Server-Sent Events: `started`, then
// `output` pieces as the command prints (each of one stream: stdout, stderr, or `output`
// where the instance cannot tell them apart), then `result` (the CommandResult) or
// `error` (an Error body). A slow client never makes the server hold more than the command's
// kept output: while the socket is full nothing is queued, and once it drains the
// client gets what is kept from where it stopped (an `offset` past the previous piece's
// end shows what was skipped).
import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CommandSession } from '../../core/commands.ts';
import type { OutputPiece } from '../../core/output-log.ts';
import { restMessage } from './hint-wording.ts';

/** A comment line this often keeps proxies and clients from timing out a quiet command. */
const KEEPALIVE_MS = 15_000;
/** Most output sent in one catch-up event. */
const CATCH_UP_BYTES = 256 * 1024;

/**
 * Takes the reply over and sends the head of an event stream, with what hooks set before
 * it began (the RateLimit fields); the response to write events to.
 */
export function openEventStream(request: FastifyRequest, reply: FastifyReply): ServerResponse {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    ...Object.fromEntries(Object.entries(reply.getHeaders()).filter(([, value]) => value !== undefined)),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
    'x-content-type-options': 'nosniff',
    'x-request-id': request.id,
  });
  return raw;
}

export function streamCommand(
  request: FastifyRequest,
  reply: FastifyReply,
  session: CommandSession,
  options: { onDisconnect: () => void },
): void {
  const raw = openEventStream(request, reply);
  let sent = 0;
  let paused = false;
  let finished = false;
  /** The client went away: nothing more is written. */
  let gone = false;
  const write = (event: string, data: unknown): void => {
    if (gone) return;
    if (!raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)) paused = true;
  };
  const send = (piece: OutputPiece): void => {
    write('output', { data: piece.data, offset: piece.offset, stream: piece.stream });
    sent = piece.end;
  };
  const catchUp = (): void => {
    while (!paused && !gone) {
      const pieces = session.output.readPieces(sent, CATCH_UP_BYTES);
      if (pieces.length === 0) return;
      for (const piece of pieces) if (!gone) send(piece);
    }
  };
  const onPiece = (piece: OutputPiece): void => {
    if (paused || piece.end <= sent) return;
    if (piece.offset !== sent) return catchUp();
    send(piece);
  };
  raw.on('drain', () => {
    paused = false;
    catchUp();
    if (session.finishedAt !== undefined && !paused) end();
  });

  write('started', { command_id: session.id, instance_id: session.instanceId, started_at: session.startedAt });
  catchUp();
  const unsubscribe = session.output.subscribe(onPiece);
  const keepalive = setInterval(() => {
    if (!paused && !gone) raw.write(': keepalive\n\n');
  }, KEEPALIVE_MS);

  const end = (): void => {
    if (finished) return;
    finished = true;
    unsubscribe();
    clearInterval(keepalive);
    if (session.error) write('error', { ...session.error.toBody(restMessage(session.error)), request_id: request.id });
    else write('result', session.result);
    if (!gone) raw.end();
  };
  raw.on('close', () => {
    gone = true;
    unsubscribe();
    clearInterval(keepalive);
    if (!finished && session.finishedAt === undefined) options.onDisconnect();
  });
  void session.done.then(() => {
    catchUp();
    // What is still to send goes first; the final event follows once the socket drains.
    if (!paused) end();
  });
}

/** What the document says of an event stream of a command (see streamCommand), with an example of one. */
export const COMMAND_EVENT_STREAM = {
  schema: {
    type: 'string',
    description:
      'Server-Sent Events: `started` ({command_id, instance_id, started_at}), then `output` ({data, offset, stream}) as the command prints, ' +
      'then one `result` (the CommandResult) or `error` (an Error body). Comment lines (`: keepalive`) come every 15 s.',
  },
  example: [
    'event: started',
    'data: {"command_id":"8d0e6f0a-4c55-4a7c-9d0b-3f3c0e5f2b6e","instance_id":"0b7f4c1e-2d3a-4f5b-8c6d-7e8f9a0b1c2d","started_at":"2026-01-15T10:00:00.000Z"}',
    '',
    'event: output',
    'data: {"data":"step 1\\n","offset":0,"stream":"stdout"}',
    '',
    'event: output',
    'data: {"data":"step 2\\n","offset":7,"stream":"stdout"}',
    '',
    'event: result',
    'data: {"instance_id":"0b7f4c1e-2d3a-4f5b-8c6d-7e8f9a0b1c2d","command":"for i in 1 2; do echo step $i; sleep 1; done","status":"success","result":{"output":"step 1\\nstep 2\\n","exit_code":0,"files_changed":[],…},…}',
    '',
  ].join('\n'),
};
