// Running commands in a room's instance, and the room's command history.
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import { MAX_COMMAND_BYTES, STDIN_ENCODINGS } from '../../../core/command-input.ts';
import { CommandPage, CommandResult, CommandStatus, StdinWritten } from '../../../core/command-schema.ts';
import { RevertResult } from '../../../core/revert-schema.ts';
import { MAX_IDLE_OUTPUT_TIMEOUT_S } from '../../../core/profile-schema.ts';
import { AppError } from '../../../errors.ts';
import { COMMAND_SIGNALS } from '../../../runtimes/types.ts';
import type { Services } from '../../../services.ts';
import { auditCommandSession } from '../../../http/audit.ts';
import { callerOf } from '../../../http/auth.ts';
import { errorResponses, RoomParams } from '../../../http/schemas.ts';
import { COMMAND_EVENT_STREAM, streamCommand } from '../sse.ts';
import { IdempotencyKeyHeaders } from '../../../http/idempotency.ts';
import type { App } from '../../../http/types.ts';

const ENV_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';

const CommandParams = Type.Object({
  ...RoomParams.properties,
  command_id: Type.String({ format: 'uuid', description: 'Command id, from a CommandResult, a CommandStatus or the room\'s command list' }),
});

export function commandRoutes(app: App, { commands, reverts, log, config }: Services): void {
  // Input may come as base64, 4 bytes for every 3: the body limit grows by what the largest input takes.
  const bodyLimit = config.bodyLimitBytes + Math.ceil(config.maxStdinBytes / 3) * 4;
  app.post(
    '/api/profile/:profile_id/room/:room_id/command',
    {
      bodyLimit,
      config: {
        auditAction: 'command.run',
        // A stream's events are not kept: a command that must run once goes in the background, with a key.
        idempotency: {
          refuse: (request) =>
            wantsStream(request)
              ? 'Idempotency-Key does not apply to a streamed command (its events are not kept to be answered again): ' +
                'start it with "background": true and the key, and follow it with GET .../commands/{command_id}, or run it without "stream"'
              : undefined,
        },
        documentedResponses: {
          200: {
            description: 'The command ended: its CommandResult; or, streamed, its events as it runs',
            content: { 'application/json': { schema: CommandResult }, 'text/event-stream': COMMAND_EVENT_STREAM },
          },
        },
      },
      schema: {
        operationId: 'runCommand',
        summary: 'Run a command',
        description:
          'Runs the command with `sh -c` as the profile\'s user in its home directory and answers when the shell exits, ' +
          'with its output, exit code and the files it changed. A failing command is still 200, with `status: "error"`. ' +
          'Processes left in the background keep running; their later output is not captured. ' +
          'With `"stream": true` or `Accept: text/event-stream` the answer is a stream of Server-Sent Events instead: ' +
          '`started`, `output` (each `{data, offset, stream}` as it is printed; `stream` is `stdout`, `stderr`, or `output` where the instance cannot tell them apart) ' +
          'and a final `result` (the CommandResult) or `error` (an Error body). ' +
          'With `"background": true` it answers 202 with a CommandStatus as soon as the command runs; follow it with GET .../commands/{command_id}. ' +
          '`stdin` is given to the command\'s standard input, which is then closed (without it, stdin is empty); ' +
          'a background command started with `"stdin_open": true` takes its input later, through POST .../commands/{command_id}/stdin.',
        tags: ['commands'],
        params: RoomParams,
        headers: IdempotencyKeyHeaders,
        body: Type.Object(
          {
            command: Type.String({ minLength: 1, maxLength: MAX_COMMAND_BYTES, description: `Shell command, at most ${MAX_COMMAND_BYTES} bytes` }),
            timeout_s: Type.Optional(Type.Integer({ minimum: 1, description: 'Time limit, seconds; default and maximum: the profile\'s command_timeout_s' })),
            idle_output_timeout_s: Type.Optional(
              Type.Integer({
                minimum: 0,
                maximum: MAX_IDLE_OUTPUT_TIMEOUT_S,
                description:
                  'Silence limit, seconds: a command that prints nothing (stdout nor stderr) for this long is ended as at its time limit ' +
                  '(its whole process tree killed, `timed_out` true), with the end reason `no_output`. Default: the profile\'s ' +
                  'command_idle_output_timeout_s (none for a background command); 0 = none',
              }),
            ),
            cwd: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'Working directory, absolute or relative to the home' })),
            env: Type.Optional(
              Type.Record(Type.String(), Type.String({ maxLength: 32768 }), {
                propertyNames: { pattern: ENV_NAME_PATTERN, maxLength: 128 },
                maxProperties: 100,
                description: 'Extra environment variables, over the profile\'s',
              }),
            ),
            stream: Type.Optional(Type.Boolean({ description: 'Answer with Server-Sent Events as the command prints (as `Accept: text/event-stream` does)' })),
            kill_on_disconnect: Type.Optional(
              Type.Boolean({ description: 'With a stream: kill the command when the client goes away (default false: it runs on, readable by its id)' }),
            ),
            background: Type.Optional(
              Type.Boolean({ description: 'Answer 202 at once; no time limit unless timeout_s is given (the profile\'s ceiling does not apply)' }),
            ),
            stdin: Type.Optional(
              Type.String({ description: `Input for the command's stdin, which is closed after it; at most ${config.maxStdinBytes} bytes once decoded (ROOMKIT_MAX_STDIN_BYTES)` }),
            ),
            stdin_encoding: Type.Optional(Type.Enum(STDIN_ENCODINGS, { description: 'How `stdin` is given: `utf8` text (the default) or `base64` for any bytes' })),
            keep_undo: Type.Optional(
              Type.Boolean({
                description:
                  'Keep this command\'s undo point, so that POST .../commands/{command_id}/revert can put back the files it changes (default: the profile\'s keep_undo). ' +
                  'true needs an instance of a profile with keep_undo (400 undo_unavailable otherwise); false skips it on such a profile',
              }),
            ),
            stdin_open: Type.Optional(
              Type.Boolean({
                description: 'Background commands only: keep stdin open (after `stdin`, if given) for POST .../commands/{command_id}/stdin. 409 feature_unavailable while the agent in the instance does not answer',
              }),
            ),
          },
          {
            additionalProperties: false,
            examples: [
              { command: 'echo hello > hello.txt && python3 -c "print(6*7)"' },
              { command: 'for i in 1 2 3; do echo step $i; sleep 1; done', stream: true },
              { command: 'python3 -m http.server 8000', background: true },
              { command: 'wc -c', stdin: 'AAEC', stdin_encoding: 'base64', timeout_s: 30 },
            ],
          },
        ),
        response: { 200: CommandResult, 202: CommandStatus, ...errorResponses(400, 401, 404, 409, 413, 422, 429, 500, 503) },
      },
    },
    async (request, reply) => {
      const { profile_id, room_id } = request.params;
      const { stream, kill_on_disconnect, background, ...input } = request.body;
      const organizationId = callerOf(request).organizationId;
      const wantsStream = streamAsked(stream, request.headers.accept);
      if (background === true && wantsStream) {
        throw new AppError('validation_error', 'background and stream exclude each other: stream a command to watch it, or start it in the background and read it with GET .../commands/{command_id}');
      }
      if (kill_on_disconnect !== undefined && !wantsStream) throw new AppError('validation_error', 'kill_on_disconnect applies only to a streamed command ("stream": true)');
      if (background === true) {
        const session = await commands.start(organizationId, profile_id, room_id, { ...input, background: true });
        return reply.code(202).send(await commands.status(organizationId, profile_id, room_id, session.id));
      }
      if (!wantsStream) return commands.run(organizationId, profile_id, room_id, input);
      const session = await commands.start(organizationId, profile_id, room_id, input);
      auditCommandSession(request, session);
      streamCommand(request, reply, session, {
        onDisconnect: () => {
          if (kill_on_disconnect !== true) return;
          commands.kill(organizationId, profile_id, room_id, session.id).catch((err: unknown) => log.warn({ err, commandId: session.id }, 'could not kill a command whose client went away'));
        },
      });
      return reply;
    },
  );

  app.get(
    '/api/profile/:profile_id/room/:room_id/commands/:command_id',
    {
      schema: {
        operationId: 'getCommand',
        summary: 'A command\'s state and output',
        description:
          'The state of a command of the room (running or ended), its output from `offset` (bytes; default 0) and, once ended, its exit code and files_changed. ' +
          'Poll with `offset` set to the last `next_offset` to get only what is new. Output is kept for 15 minutes after a command ends; the record stays.',
        tags: ['commands'],
        params: CommandParams,
        querystring: Type.Object(
          { offset: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', description: 'Byte offset to read the output from' })) },
          { additionalProperties: false },
        ),
        response: { 200: CommandStatus, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { profile_id, room_id, command_id } = request.params;
      const { offset } = request.query;
      return commands.status(callerOf(request).organizationId, profile_id, room_id, command_id, offset === undefined ? {} : { offset: Number(offset) });
    },
  );

  app.post(
    '/api/profile/:profile_id/room/:room_id/commands/:command_id/kill',
    {
      config: { auditAction: 'command.kill' },
      schema: {
        operationId: 'killCommand',
        summary: 'Signal a running command',
        description:
          'Sends a signal (default KILL) to every process of the command, including those it left in the background. ' +
          'With KILL it answers once the command has ended (state `killed`); other signals are only sent, and the command may go on.',
        tags: ['commands'],
        params: CommandParams,
        body: Type.Object({ signal: Type.Optional(Type.Enum(COMMAND_SIGNALS, { description: 'Default KILL' })) }, { additionalProperties: false }),
        response: { 200: CommandStatus, ...errorResponses(400, 401, 404, 409) },
      },
    },
    async (request) => {
      const { profile_id, room_id, command_id } = request.params;
      return commands.kill(callerOf(request).organizationId, profile_id, room_id, command_id, request.body.signal ?? 'KILL');
    },
  );

  app.post(
    '/api/profile/:profile_id/room/:room_id/commands/:command_id/revert',
    {
      config: { auditAction: 'command.revert' },
      schema: {
        operationId: 'revertCommand',
        summary: 'Revert the file changes of one command',
        description:
          'Puts every file the command created, modified or deleted back as it was before the command (created files are removed, modified ' +
          'ones get their old content, deleted ones come back; each with its old owner and mode), and answers with the files the revert changed. ' +
          'Only for a command run with keep_undo (on the command or its profile) in the room\'s current instance, once, while its undo point is kept ' +
          '(409 no_undo_point otherwise). When later commands changed some of the same files, it is refused (409 revert_conflict, details.files) ' +
          'unless `force` is true. Processes, memory and directories the command made are not reverted.',
        tags: ['commands'],
        params: CommandParams,
        body: Type.Optional(
          Type.Object(
            { force: Type.Optional(Type.Boolean({ description: 'Revert even when later commands changed some of the same files (their changes to those files are undone too)' })) },
            { additionalProperties: false },
          ),
        ),
        response: { 200: RevertResult, ...errorResponses(400, 401, 404, 409) },
      },
    },
    async (request) => {
      const { profile_id, room_id, command_id } = request.params;
      return reverts.revert(callerOf(request).organizationId, profile_id, room_id, command_id, { force: request.body?.force === true });
    },
  );

  app.post(
    '/api/profile/:profile_id/room/:room_id/commands/:command_id/stdin',
    {
      config: { auditAction: 'command.stdin' },
      bodyLimit,
      schema: {
        operationId: 'writeCommandStdin',
        summary: 'Write to a running command\'s stdin',
        description:
          'Writes `data` to the standard input of a running background command started with `"stdin_open": true`, then closes its stdin if `close` is true. ' +
          'Writes reach the command in the order they are answered. It answers once the instance has taken the input: a command that does not read its input ' +
          'holds the answer until it reads or ends. The input itself is never recorded.',
        tags: ['commands'],
        params: CommandParams,
        body: Type.Object(
          {
            data: Type.Optional(Type.String({ description: `Input to write; at most ${config.maxStdinBytes} bytes once decoded (ROOMKIT_MAX_STDIN_BYTES)` })),
            encoding: Type.Optional(Type.Enum(STDIN_ENCODINGS, { description: 'How `data` is given: `utf8` text (the default) or `base64` for any bytes' })),
            close: Type.Optional(Type.Boolean({ description: 'Close the command\'s stdin after `data` (it then reads end of input)' })),
          },
          { additionalProperties: false },
        ),
        response: { 200: StdinWritten, ...errorResponses(400, 401, 404, 409, 413) },
      },
    },
    async (request) => {
      const { profile_id, room_id, command_id } = request.params;
      return commands.writeStdin(callerOf(request).organizationId, profile_id, room_id, command_id, request.body);
    },
  );

  app.get(
    '/api/profile/:profile_id/room/:room_id/commands',
    {
      schema: {
        operationId: 'listCommands',
        summary: 'List the room\'s commands',
        description: 'Every command run in the room (all its instances), newest first. Pass `next_cursor` back as `cursor` for the next page.',
        tags: ['commands'],
        params: RoomParams,
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.String({ pattern: '^(200|1[0-9]{2}|[1-9][0-9]?)$', description: '1-200, default 50' })),
            cursor: Type.Optional(Type.String({ maxLength: 512 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: CommandPage,
          ...errorResponses(400, 401, 404),
        },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      const { limit, cursor } = request.query;
      return commands.list(callerOf(request).organizationId, profile_id, room_id, {
        limit: limit === undefined ? 50 : Number(limit),
        ...(cursor === undefined ? {} : { cursor }),
      });
    },
  );
}

/** Whether a command request asks for Server-Sent Events: `stream`, or else its Accept header. */
function streamAsked(stream: boolean | undefined, accept: string | undefined): boolean {
  return stream === true || (stream === undefined && (accept ?? '').includes('text/event-stream'));
}

function wantsStream(request: FastifyRequest): boolean {
  return streamAsked((request.body as { stream?: boolean } | undefined)?.stream, request.headers.accept);
}
