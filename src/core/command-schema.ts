// The shapes of a command as the API shows it: its result, its status while it runs and
// after, and its record in the room's history. These TypeBox schemas are the one source
// of the fields: the routes validate and document with them, core/ builds values of the
// types derived from them, and the SDK's types are generated from the OpenAPI they make.
import Type from 'typebox';
import { PathEncoding } from './file-schema.ts';

export const COMMAND_STATES = ['running', 'exited', 'timed_out', 'killed', 'interrupted', 'error'] as const;
export type CommandState = (typeof COMMAND_STATES)[number];

/**
 * Why a command ended, for code to branch on. A fixed set: new reasons may be added,
 * so treat an unknown one as "other".
 */
export const COMMAND_END_REASONS = [
  'exited',
  'signal',
  'time_limit',
  'no_output',
  'killed',
  'out_of_memory',
  'disk_full',
  'instance_stopped',
  'service_stopped',
  'error',
] as const;
export type CommandEndReason = (typeof COMMAND_END_REASONS)[number];

const END_REASON_DESCRIPTION =
  'Why it ended: `exited` (it ended on its own), `signal` (it ended on a signal it did not get from roomkit: exit code 128+n), ' +
  '`time_limit` (killed at its time limit), `no_output` (killed at its silence limit, `idle_output_timeout_s`: it printed nothing for that long), `killed` (a kill request), `out_of_memory` (the instance reached its memory size and ' +
  'roomkit killed a process of this command), `disk_full` (it failed with the instance\'s disk full), `instance_stopped` ' +
  '(its instance stopped or its machine ended while it ran), `service_stopped` (the service stopped while it ran), `error` ' +
  '(it could not be run)';
export const CommandEndReason = Type.Enum(COMMAND_END_REASONS, { description: END_REASON_DESCRIPTION });

export const FileChange = Type.Object(
  {
    path: Type.String({ description: 'Absolute path in the instance (percent-escaped when `path_encoding` says so)' }),
    path_encoding: PathEncoding,
    status: Type.Enum(['created', 'modified', 'deleted']),
    size: Type.Optional(Type.Integer({ description: 'Bytes (created and modified files)' })),
    mime_type: Type.Optional(Type.String()),
    public_url: Type.Optional(Type.String({ description: 'Relative URL of the file\'s raw content, no authentication needed' })),
  },
  { title: 'FileChange' },
);
export type FileChange = Type.Static<typeof FileChange>;

/**
 * stdout and stderr apart, each kept within the output limit like `output`; null from a
 * runtime that cannot tell them apart (`output` has both); gVisor instances always keep them apart.
 */
const streamFields = {
  stdout: Type.Union([Type.String(), Type.Null()], {
    description: 'What the command wrote to stdout (lossy UTF-8), the middle cut beyond the output limit like `output`; null when the instance cannot keep stdout and stderr apart',
  }),
  stderr: Type.Union([Type.String(), Type.Null()], { description: 'What it wrote to stderr, as `stdout`' }),
  stdout_bytes: Type.Union([Type.Integer(), Type.Null()], { description: 'Bytes written to stdout, all of them' }),
  stderr_bytes: Type.Union([Type.Integer(), Type.Null()], { description: 'Bytes written to stderr, all of them' }),
  stdout_truncated: Type.Union([Type.Boolean(), Type.Null()], { description: 'Whether `stdout` lost its middle to the output limit' }),
  stderr_truncated: Type.Union([Type.Boolean(), Type.Null()], { description: 'Whether `stderr` lost its middle to the output limit' }),
};
export type StreamFields = { [K in keyof typeof streamFields]: Type.Static<(typeof streamFields)[K]> };

/** The stream fields of a command that kept no streams apart. */
export const NO_STREAMS: StreamFields = { stdout: null, stderr: null, stdout_bytes: null, stderr_bytes: null, stdout_truncated: null, stderr_truncated: null };

export const CommandResult = Type.Object(
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
      ...streamFields,
      files_changed_total: Type.Integer(),
      files_changed_truncated: Type.Boolean(),
      files_changed_method: Type.Optional(
        Type.Enum(['fanotify', 'walk'], {
          description: 'How files_changed was made: from the paths the kernel reported touched, or by walking the whole writable layer (the fallback); absent when the runtime does not say',
        }),
      ),
      end_reason: CommandEndReason,
    }),
    command_id: Type.String({ format: 'uuid' }),
    started_at: Type.String({ format: 'date-time' }),
    duration_ms: Type.Integer(),
  },
  {
    title: 'CommandResult',
    // A real answer, to `echo hello > hello.txt && python3 -c "print(6*7)"`.
    examples: [
      {
        instance_id: 'f3c13fec-9952-415d-a499-41fcc0919947',
        command: 'echo hello > hello.txt && python3 -c "print(6*7)"',
        status: 'success',
        result: {
          output: '42\n',
          exit_code: 0,
          files_changed: [
            {
              path: '/home/user/hello.txt',
              status: 'created',
              size: 6,
              mime_type: 'text/plain',
              public_url: '/vm/f3c13fec-9952-415d-a499-41fcc0919947/file/home/user/hello.txt',
            },
          ],
          timed_out: false,
          output_truncated: false,
          output_bytes: 3,
          stdout: '42\n',
          stderr: '',
          stdout_bytes: 3,
          stderr_bytes: 0,
          stdout_truncated: false,
          stderr_truncated: false,
          files_changed_total: 1,
          files_changed_truncated: false,
          end_reason: 'exited',
          files_changed_method: 'fanotify',
        },
        command_id: '407dd0b8-acd8-4f43-890f-46041cb509f5',
        started_at: '2026-11-24T05:48:54.742Z',
        duration_ms: 149,
      },
    ],
  },
);
export type CommandResult = Type.Static<typeof CommandResult>;

/** What names a command, in its record and its status. */
const identity = {
    command_id: Type.String({ format: 'uuid' }),
    instance_id: Type.String({ format: 'uuid' }),
    command: Type.String(),
};

/** When a command ran, in its record and its status; null while it runs. */
const timing = {
    started_at: Type.String({ format: 'date-time' }),
    finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    duration_ms: Type.Union([Type.Integer(), Type.Null()]),
};

/** A command in the room's history: what the store keeps once its output is gone. */
export const CommandRecord = Type.Object(
  {
    ...identity,
    state: Type.Enum(COMMAND_STATES, { description: '`interrupted`: the service stopped while it ran; `error`: it could not be run' }),
    exit_code: Type.Union([Type.Integer(), Type.Null()]),
    output_bytes: Type.Union([Type.Integer(), Type.Null()]),
    files_changed_total: Type.Union([Type.Integer(), Type.Null()], {
      description: 'How many files it changed (a CommandResult\'s files_changed_total); null while it runs. The list itself is in GET .../commands/{id} while kept',
    }),
    ...timing,
    end_reason: Type.Union([CommandEndReason, Type.Null()], { description: `${END_REASON_DESCRIPTION}. Null while it runs, and for commands recorded before end reasons were kept` }),
  },
  { title: 'CommandRecord' },
);
export type CommandRecord = Type.Static<typeof CommandRecord>;

export const CommandPage = Type.Object({ commands: Type.Array(CommandRecord), next_cursor: Type.Union([Type.String(), Type.Null()]) });
export type CommandPage = Type.Static<typeof CommandPage>;

/** A command's state as GET .../commands/{id} answers it: the record, output from an offset, and the outcome once finished. */
export const CommandStatus = Type.Object(
  {
    ...identity,
    state: Type.Enum(COMMAND_STATES, { description: '`running` until it ends; `killed`: ended by a kill request' }),
    background: Type.Boolean(),
    exit_code: Type.Union([Type.Integer(), Type.Null()], { description: 'null while running' }),
    ...timing,
    end_reason: Type.Union([CommandEndReason, Type.Null()], { description: `${END_REASON_DESCRIPTION}. Null while it runs, and for commands recorded before end reasons were kept` }),
    output: Type.String({ description: 'Output from output_offset to next_offset (stdout and stderr interleaved)' }),
    output_offset: Type.Integer({ description: 'Byte offset where `output` starts: more than asked for when older output was no longer kept' }),
    next_offset: Type.Integer({ description: 'Byte offset to ask for next (`?offset=`) to get only newer output' }),
    output_bytes: Type.Integer({ description: 'Bytes printed so far' }),
    output_available: Type.Boolean({ description: 'false once the output is no longer kept (15 minutes after the end, or a server restart)' }),
    ...streamFields,
    stdin_open: Type.Boolean({ description: 'Whether the command takes more input now (started with `stdin_open`, not yet closed, still running)' }),
    timed_out: Type.Union([Type.Boolean(), Type.Null()]),
    files_changed: Type.Union([Type.Array(FileChange), Type.Null()], { description: 'Once ended and while kept, as in a CommandResult' }),
    files_changed_total: Type.Union([Type.Integer(), Type.Null()]),
    files_changed_truncated: Type.Union([Type.Boolean(), Type.Null()]),
    result: Type.Union([CommandResult, Type.Null()], {
      description:
        'Once it has ended, while its output is kept: its CommandResult, the very shape a foreground command answers with (so a ' +
        'background command\'s outcome reads like any other); null while it runs and once the output is no longer kept',
    }),
  },
  { title: 'CommandStatus' },
);
export type CommandStatus = Type.Static<typeof CommandStatus>;

/** What POST …/commands/{command_id}/stdin answers: the input was handed to the command. */
export const StdinWritten = Type.Object(
  {
    command_id: Type.String({ format: 'uuid' }),
    bytes: Type.Integer({ description: 'Bytes of this request\'s data written' }),
    total_bytes: Type.Integer({ description: 'Bytes written to the command\'s stdin so far, through every request' }),
    closed: Type.Boolean({ description: 'Whether its stdin is closed now (the command reads end of input once it has read the rest)' }),
  },
  { title: 'StdinWritten' },
);
export type StdinWritten = Type.Static<typeof StdinWritten>;
