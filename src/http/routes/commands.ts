// Running commands in a room's instance, and the room's command history.
import Type from 'typebox';
import { COMMAND_STATES, MAX_COMMAND_BYTES } from '../../core/commands.ts';
import type { Services } from '../../services.ts';
import { callerOf } from '../auth.ts';
import { errorResponses, RoomParams } from '../schemas.ts';
import type { App } from '../types.ts';

const ENV_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*$';

const FileChange = Type.Object(
  {
    path: Type.String({ description: 'Absolute path in the instance' }),
    status: Type.Enum(['created', 'modified', 'deleted']),
    size: Type.Optional(Type.Integer({ description: 'Bytes (created and modified files)' })),
    mime_type: Type.Optional(Type.String()),
    public_url: Type.Optional(Type.String({ description: 'Relative URL of the file\'s raw content, no authentication needed' })),
  },
  { title: 'FileChange' },
);

const CommandResult = Type.Object(
  {
    instance_id: Type.String({ format: 'uuid' }),
    command: Type.String(),
    status: Type.Enum(['success', 'error'], { description: '`success` when exit_code is 0, else `error`' }),
    result: Type.Object({
      output: Type.String({ description: 'stdout and stderr interleaved as produced; the middle is cut beyond the output limit' }),
      exit_code: Type.Integer({ description: '128+n when killed by signal n; 124 when the time limit killed it' }),
      files_changed: Type.Array(FileChange, { description: 'Regular files created, modified or deleted while the command ran, sorted by path' }),
      timed_out: Type.Boolean(),
      output_truncated: Type.Boolean(),
      output_bytes: Type.Integer({ description: 'Bytes the command printed, all of them' }),
      files_changed_total: Type.Integer(),
      files_changed_truncated: Type.Boolean(),
    }),
    command_id: Type.String({ format: 'uuid' }),
    started_at: Type.String({ format: 'date-time' }),
    duration_ms: Type.Integer(),
  },
  { title: 'CommandResult' },
);

const CommandRecord = Type.Object(
  {
    command_id: Type.String({ format: 'uuid' }),
    instance_id: Type.String({ format: 'uuid' }),
    command: Type.String(),
    state: Type.Enum(COMMAND_STATES, { description: '`interrupted`: the service stopped while it ran; `error`: it could not be run' }),
    exit_code: Type.Union([Type.Integer(), Type.Null()]),
    output_bytes: Type.Union([Type.Integer(), Type.Null()]),
    files_changed: Type.Union([Type.Integer(), Type.Null()]),
    started_at: Type.String({ format: 'date-time' }),
    finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    duration_ms: Type.Union([Type.Integer(), Type.Null()]),
  },
  { title: 'CommandRecord' },
);

export function commandRoutes(app: App, { commands }: Services): void {
  app.post(
    '/api/profile/:profile_id/room/:room_id/command',
    {
      schema: {
        summary: 'Run a command',
        description:
          'Runs the command with `sh -c` as the profile\'s user in its home directory and answers when the shell exits, ' +
          'with its output, exit code and the files it changed. A failing command is still 200, with `status: "error"`. ' +
          'Processes left in the background keep running; their later output is not captured.',
        tags: ['commands'],
        params: RoomParams,
        body: Type.Object(
          {
            command: Type.String({ minLength: 1, maxLength: MAX_COMMAND_BYTES, description: `Shell command, at most ${MAX_COMMAND_BYTES} bytes` }),
            timeout_s: Type.Optional(Type.Integer({ minimum: 1, description: 'Time limit, seconds; default and maximum: the profile\'s command_timeout_s' })),
            cwd: Type.Optional(Type.String({ minLength: 1, maxLength: 4096, description: 'Working directory, absolute or relative to the home' })),
            env: Type.Optional(
              Type.Record(Type.String(), Type.String({ maxLength: 32768 }), {
                propertyNames: { pattern: ENV_NAME_PATTERN, maxLength: 128 },
                maxProperties: 100,
                description: 'Extra environment variables, over the profile\'s',
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: CommandResult, ...errorResponses(400, 401, 404, 409, 429, 500, 503) },
      },
    },
    async (request) => {
      const { profile_id, room_id } = request.params;
      return commands.run(callerOf(request).organizationId, profile_id, room_id, request.body);
    },
  );

  app.get(
    '/api/profile/:profile_id/room/:room_id/commands',
    {
      schema: {
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
          200: Type.Object({ commands: Type.Array(CommandRecord), next_cursor: Type.Union([Type.String(), Type.Null()]) }),
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
