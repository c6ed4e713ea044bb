// The agent tool layer: one set of tool definitions (names, descriptions a model can act
// on, JSON Schema parameters, the endpoint each maps to), their shapes for the model
// vendors' APIs and MCP, argument validation, and the executor that runs a call through
// a backend and words the outcome for a model. GET .../tools, POST .../tools/call, the
// MCP server at /mcp and `roomkit mcp` all use it, so they cannot drift apart.
import Schema from 'typebox/schema';
import { AppError, ERROR_STATUS } from '../errors.ts';
import { ROOM_ID_PATTERN, UUID_PATTERN } from './ids.ts';
import { type CommandResult, type CommandStatus, publicUrl } from './commands.ts';
import { COMMAND_SIGNALS, type CommandSignal } from '../runtimes/types.ts';
import type { FileContent } from './files.ts';
import type { Instance } from './instances.ts';
import { PROFILE_DEFAULTS } from './profile-schema.ts';

export const TOOL_FORMATS = ['roomkit', 'openai', 'anthropic', 'mcp'] as const;
export type ToolFormat = (typeof TOOL_FORMATS)[number];

/** Tools that act on a room's instance. */
export const ROOM_TOOLS = ['run_command', 'command_output', 'kill_command', 'read_file', 'write_file', 'list_files', 'delete_file'] as const;
/** Tools that create, show and delete a room's instance (MCP only: there the model picks rooms). */
export const INSTANCE_TOOLS = ['create_instance', 'get_instance', 'delete_instance'] as const;
export type ToolName = (typeof ROOM_TOOLS)[number] | (typeof INSTANCE_TOOLS)[number];

/** Images a model can be shown: the types the vendors' APIs and MCP clients accept. */
export const IMAGE_TYPES: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
/** Largest image returned inline (the vendors refuse larger ones); larger ones are described. */
export const MAX_INLINE_IMAGE_BYTES = 5 * 1024 * 1024;
/** Profile used when an MCP call names none. */
export const DEFAULT_PROFILE = 'default';

export type JsonSchema = Record<string, unknown>;

export interface ObjectSchema {
  type: 'object';
  properties: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties: false;
}

/** MCP's tool annotations: hints for clients deciding what to confirm with the user. */
export interface ToolAnnotations {
  readOnlyHint: boolean;
  destructiveHint: boolean;
  idempotentHint: boolean;
  openWorldHint: boolean;
}

/** The API endpoint a tool maps to; `query` and `body` name the arguments that go there. */
export interface ToolEndpoint {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** `{path}` stands for the `path` argument; `{profile_id}` and `{room_id}` for the room when not fixed. */
  path: string;
  query?: string[];
  body?: string[];
}

export interface ToolDefinition {
  name: ToolName;
  title: string;
  description: string;
  input_schema: ObjectSchema;
  annotations: ToolAnnotations;
  endpoint: ToolEndpoint;
}

/** What a room's machine is like, from the profile it was made from: the descriptions state it. */
export interface MachineFacts {
  image: string;
  user: string;
  home: string;
  commandTimeoutS: number;
  egress: 'internet' | 'none';
}

/** Server limits the descriptions state and the result formatting applies. */
export interface ToolLimits {
  maxOutputBytes: number;
  maxFileReadBytes: number;
  maxUploadBytes: number;
  filesChangedLimit: number;
  maxListEntries: number;
}

/**
 * What the tools are for: one room, fixed by the caller (GET .../tools; the tools take
 * no room argument), or any room of the organization (MCP: each tool takes `room` and
 * `profile`, and the instance tools exist).
 */
export type ToolScope =
  | { kind: 'room'; profileId: string; roomId: string; machine: MachineFacts }
  | { kind: 'organization' };

// ---------------------------------------------------------------------------
// Definitions

const ROOM_PATH = '/api/profile/{profile_id}/room/{room_id}';

function size(bytes: number): string {
  const units: [number, string][] = [
    [1024 ** 3, 'GiB'],
    [1024 ** 2, 'MiB'],
    [1024, 'KiB'],
  ];
  for (const [unit, name] of units) {
    if (bytes >= unit) {
      const n = bytes / unit;
      return `${Number.isInteger(n) ? n : n.toFixed(1)} ${name}`;
    }
  }
  return `${bytes} bytes`;
}

/** The tools of a scope, their descriptions written for a model. */
export function toolDefinitions(scope: ToolScope, limits: ToolLimits): ToolDefinition[] {
  const room = scope.kind === 'room' ? scope : undefined;
  const m = room?.machine;
  const base = room ? `/api/profile/${room.profileId}/room/${encodeURIComponent(room.roomId)}` : ROOM_PATH;

  // Phrases that differ between one known room and any room of the organization.
  const where = m ? "this room's machine" : "the room's machine";
  const user = m ? `user \`${m.user}\` (uid 1000)` : "the profile's unprivileged user (uid 1000)";
  const home = m ? m.home : 'its home directory';
  const relative = m ? `relative to ${m.home}` : 'relative to the home directory';
  const timeout = m
    ? `${m.commandTimeoutS} s, also the most timeout_s may ask for`
    : `the profile's command_timeout_s (${PROFILE_DEFAULTS.command_timeout_s} s unless the profile sets another), also the most timeout_s may ask for`;
  const network = !m ? '' : m.egress === 'internet' ? ' It can reach the internet.' : ' It has no network access.';
  const machineIntro = m ? `an isolated Linux machine (${m.image})` : 'an isolated Linux machine';
  const half = size(Math.floor(limits.maxOutputBytes / 2));

  // Arguments naming the room, when the scope does not fix it.
  const roomArgs: Record<string, JsonSchema> = room
    ? {}
    : {
        room: {
          type: 'string',
          pattern: ROOM_ID_PATTERN,
          description: 'The room: a name you choose for a machine, e.g. a task or session id (1-128 of A-Z a-z 0-9 . _ -).',
        },
        profile: {
          type: 'string',
          minLength: 1,
          maxLength: 64,
          description: `The profile the room belongs to, by name or id (default "${DEFAULT_PROFILE}"). The profile sets the machine's image, memory, CPUs, disk, user and time limits.`,
        },
      };
  const roomRequired = room ? [] : ['room'];
  const object = (properties: Record<string, JsonSchema>, required: string[]): ObjectSchema => {
    const all = [...roomRequired, ...required];
    return { type: 'object', properties: { ...roomArgs, ...properties }, ...(all.length > 0 ? { required: all } : {}), additionalProperties: false };
  };
  const path = (what: string): JsonSchema => ({
    type: 'string',
    minLength: 1,
    maxLength: 4096,
    description: `${what}: absolute, or ${relative}.`,
  });

  const definitions: ToolDefinition[] = [
    {
      name: 'run_command',
      title: 'Run a command',
      description: [
        `Runs a shell command with \`sh -c\` in ${where}, ${machineIntro}, and returns its output, its exit code and the files it changed.${network}`,
        `- Runs as ${user} in ${home}; relative paths are ${relative}. \`sudo\` works without a password (e.g. \`sudo apt-get install -y jq\`).`,
        '- Each call is a new shell: `cd` and variables do not carry over. Chain commands with `&&`, or pass `cwd`.',
        `- Time limit: ${timeout}. At the limit every process of the command is killed and the exit code is 124.`,
        '- Long work (servers, builds, test suites, downloads): pass `background: true`. The call then answers at once with a command_id; the command has no time limit, command_output shows its new output and, once it ends, its exit code, and kill_command stops it.',
        '- Standard input is empty: use non-interactive options (`-y`, `--yes`).',
        `- Output is stdout and stderr interleaved in the order written. Beyond ${size(limits.maxOutputBytes)} the middle is cut: the first and the last ${half} are kept.`,
        '- A non-zero exit code is reported, not raised: read the output to see what failed.',
        `- "Files changed" lists every regular file the command created, modified or deleted anywhere on the machine while it ran (at most ${limits.filesChangedLimit}), with its size, MIME type and a URL where its content can be fetched without authentication, e.g. to show the user an image or a document you made.`,
      ].join('\n'),
      input_schema: object(
        {
          command: { type: 'string', minLength: 1, maxLength: 65536, description: 'The shell command, e.g. "ls -la" or "cd app && npm test".' },
          cwd: { ...path('Working directory'), description: `Working directory: absolute, or ${relative} (default: ${m ? m.home : 'the home directory'}).` },
          timeout_s: {
            type: 'integer',
            minimum: 1,
            ...(m ? { maximum: m.commandTimeoutS } : {}),
            description: `Time limit in seconds (default and most: ${m ? `${m.commandTimeoutS}` : "the profile's command_timeout_s"}; with background: none unless given).`,
          },
          background: { type: 'boolean', description: 'Start the command and answer at once with its command_id instead of waiting for it (default false).' },
        },
        ['command'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: m ? m.egress === 'internet' : true },
      endpoint: { method: 'POST', path: `${base}/command`, body: ['command', 'cwd', 'timeout_s', 'background'] },
    },
    {
      name: 'command_output',
      title: 'Check a command',
      description: [
        `Shows a command started with run_command in ${where} (with background: true, or any earlier one), by its command_id: whether it still runs, its output from \`offset\` on and, once it has ended, its exit code and the files it changed.`,
        '- Output is counted in bytes. The answer gives next_offset: pass it as offset next time to get only the output printed since.',
        `- The last ${size(limits.maxOutputBytes)} of a command's output is kept, for 15 minutes after it ends.`,
        '- To wait for a background command, call this again after a while (e.g. run_command `sleep 10` in between for long work).',
      ].join('\n'),
      input_schema: object(
        {
          command_id: { type: 'string', pattern: UUID_PATTERN, description: 'The command_id run_command answered with.' },
          offset: { type: 'integer', minimum: 0, description: 'Byte offset to read the output from: the next_offset of the previous call (default 0: from the start).' },
        },
        ['command_id'],
      ),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: `${base}/commands/{command_id}`, query: ['offset'] },
    },
    {
      name: 'kill_command',
      title: 'Stop a command',
      description: [
        `Stops a running command of ${where} by its command_id, with every process it started (also ones it left in the background).`,
        '- signal KILL (default) ends it at once; TERM (or INT, HUP) asks it to stop, so it may clean up first: check with command_output.',
      ].join('\n'),
      input_schema: object(
        {
          command_id: { type: 'string', pattern: UUID_PATTERN, description: 'The command_id run_command answered with.' },
          signal: { type: 'string', enum: [...COMMAND_SIGNALS], description: 'The signal to send (default KILL).' },
        },
        ['command_id'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      endpoint: { method: 'POST', path: `${base}/commands/{command_id}/kill`, body: ['signal'] },
    },
    {
      name: 'read_file',
      title: 'Read a file',
      description: [
        `Reads a file of ${where} as ${user}, fresh on every call.`,
        `- Text (valid UTF-8) comes back as it is. Beyond ${size(limits.maxOutputBytes)} only the first part is returned, with a note saying how to read on: \`offset\` and \`limit\` pick lines.`,
        `- PNG, JPEG, GIF and WebP images up to ${size(MAX_INLINE_IMAGE_BYTES)} come back as images you can see.`,
        '- Other binary files are described (type, size, URL), not returned: inspect them with run_command (`file`, `xxd | head`).',
        `- Files larger than ${size(limits.maxFileReadBytes)} cannot be read here: use run_command (\`head\`, \`tail\`, \`grep\`).`,
      ].join('\n'),
      input_schema: object(
        {
          path: path('The file'),
          offset: { type: 'integer', minimum: 1, description: 'First line to return, counting from 1 (text files; default 1).' },
          limit: { type: 'integer', minimum: 1, description: 'How many lines to return at most (text files; default: all).' },
        },
        ['path'],
      ),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: `${base}/file/{path}` },
    },
    {
      name: 'write_file',
      title: 'Write a file',
      description: [
        `Creates or replaces a file of ${where} as ${user}, with the whole content given, creating missing parent directories.`,
        `- At most ${size(limits.maxUploadBytes)}. Binary data goes base64-encoded with encoding "base64".`,
        '- To change part of a file, read it and write the whole new content, or edit it in place with run_command (`sed -i`, `patch`).',
        '- Answers whether the file was created or replaced, its size, and a URL where its content can be fetched without authentication.',
      ].join('\n'),
      input_schema: object(
        {
          path: path('The file'),
          content: { type: 'string', description: 'The whole new content of the file.' },
          encoding: { type: 'string', enum: ['utf-8', 'base64'], description: 'How content is given: "utf-8" text (default) or "base64" bytes.' },
        },
        ['path', 'content'],
      ),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'PUT', path: `${base}/file/{path}`, body: ['content', 'encoding'] },
    },
    {
      name: 'list_files',
      title: 'List a directory',
      description: [
        `Lists a directory of ${where} as ${user}: each entry's type, size in bytes, permissions, modification time and name (directories end with "/"), sorted by name, at most ${limits.maxListEntries} entries.`,
        '- For a recursive view or a search, use run_command (`find`, `ls -R`, `grep -r`).',
      ].join('\n'),
      input_schema: object({ path: { ...path('The directory'), description: `The directory: absolute, or ${relative} (default: ${m ? m.home : 'the home directory'}).` } }, []),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: `${base}/files`, query: ['path'] },
    },
    {
      name: 'delete_file',
      title: 'Delete a file',
      description: `Deletes a file or a symbolic link of ${where} as ${user}. Directories are not deleted here: use run_command (\`rm -r DIR\`).`,
      input_schema: object({ path: path('The file') }, ['path']),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'DELETE', path: `${base}/file/{path}` },
    },
  ];
  if (room) return definitions;

  const instanceTools: ToolDefinition[] = [
    {
      name: 'create_instance',
      title: 'Create a machine',
      description: [
        "Creates a room's machine, an isolated Linux machine, and waits until it is ready (a few seconds; the first machine of a profile can take a minute while its image is built). If the room already has one, answers with it: calling again is safe.",
        '- Every other tool needs the room to have a machine. Files and installed packages stay on it until it is deleted (or stopped after the profile\'s idle time).',
        '- Answers with the machine\'s user, home directory, command time limit and network access.',
      ].join('\n'),
      input_schema: object({}, []),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'POST', path: ROOM_PATH },
    },
    {
      name: 'get_instance',
      title: 'Show a machine',
      description: "Shows a room's machine: its state (ready, being created, failed and why), its user, home directory, command time limit and network access.",
      input_schema: object({}, []),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'GET', path: ROOM_PATH },
    },
    {
      name: 'delete_instance',
      title: 'Delete a machine',
      description: "Stops a room's machine and deletes it with everything on it: this cannot be undone. create_instance gives the room a new, empty machine.",
      input_schema: object({}, []),
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
      endpoint: { method: 'DELETE', path: ROOM_PATH },
    },
  ];
  return [...instanceTools, ...definitions];
}

// ---------------------------------------------------------------------------
// Formats

/** The tools in a vendor's shape; each item is exactly what that API takes, nothing more. */
export function formatTools(definitions: ToolDefinition[], format: ToolFormat): unknown[] {
  switch (format) {
    case 'roomkit':
      return definitions;
    case 'openai':
      return definitions.map((d) => ({ type: 'function', function: { name: d.name, description: d.description, parameters: d.input_schema } }));
    case 'anthropic':
      return definitions.map((d) => ({ name: d.name, description: d.description, input_schema: d.input_schema }));
    case 'mcp':
      return definitions.map(toMcpTool);
  }
}

export function toMcpTool(d: ToolDefinition) {
  return { name: d.name, title: d.title, description: d.description, inputSchema: d.input_schema, annotations: { title: d.title, ...d.annotations } };
}

// ---------------------------------------------------------------------------
// Execution

/** A room as a tool call names it: the profile by id or name. */
export interface RoomRef {
  profile: string;
  room: string;
}

export interface ProfileFacts extends MachineFacts {
  profile_id: string;
  name: string;
}

export interface InstanceInfo {
  instance: Instance;
  profile: ProfileFacts;
  /** Whether a create made it (false: the room had it already); unknown elsewhere. */
  created?: boolean;
}

export interface FileWritten {
  file_path: string;
  instance_id: string;
  status: 'created' | 'modified';
  size: number;
}

export interface DirectoryListing {
  path: string;
  instance_id: string;
  entries: { name: string; type: 'file' | 'directory' | 'symlink' | 'other'; size: number; mode: string; mtime: string }[];
  truncated: boolean;
}

export interface FileDeleted {
  file_path: string;
  instance_id: string;
  status: 'deleted';
}

/**
 * What tools run against: roomkit's services in the server, or its HTTP API elsewhere.
 * Failures are thrown as errors whose `code` is one of the API's error codes.
 */
export interface ToolBackend {
  createInstance(ref: RoomRef): Promise<InstanceInfo>;
  getInstance(ref: RoomRef): Promise<InstanceInfo>;
  deleteInstance(ref: RoomRef): Promise<InstanceInfo>;
  runCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }): Promise<CommandResult>;
  /** Starts a command in the background and answers with its status at once. */
  startCommand(ref: RoomRef, input: { command: string; cwd?: string; timeout_s?: number }): Promise<CommandStatus>;
  commandStatus(ref: RoomRef, commandId: string, offset: number): Promise<CommandStatus>;
  killCommand(ref: RoomRef, commandId: string, signal: CommandSignal): Promise<CommandStatus>;
  readFile(ref: RoomRef, path: string): Promise<FileContent>;
  writeFile(ref: RoomRef, path: string, data: Buffer): Promise<FileWritten>;
  listFiles(ref: RoomRef, path: string): Promise<DirectoryListing>;
  deleteFile(ref: RoomRef, path: string): Promise<FileDeleted>;
}

export type ToolContent = { type: 'text'; text: string } | { type: 'image'; data: string; mimeType: string };

export interface ToolResult {
  /** What the model reads. */
  content: ToolContent[];
  /** The call failed: a non-zero exit code, or an error the arguments caused. */
  isError: boolean;
  /** The JSON the mapped endpoint answers (its Error body on an error; read_file without `content`). */
  structured: unknown;
}

export interface CallOptions {
  /** Origin the public_url paths are served from, so the model gets whole URLs. */
  publicBaseUrl?: string;
  /** API error codes answered as a tool result with isError; any other is thrown. */
  reportAsResult: (code: string) => boolean;
}

/**
 * Errors a model's arguments cause and that it can correct itself: a tool result, not a
 * failed request, wherever the caller is not the model's own loop.
 */
export const ARGUMENT_ERRORS: ReadonlySet<string> = new Set([
  'validation_error',
  'invalid_path',
  'is_a_directory',
  'not_a_directory',
  'file_not_found',
  'permission_denied',
  'file_too_large',
  'body_too_large',
  'no_space',
  'command_not_found',
  'command_not_running',
]);

/** The API error an exception carries, if it is one (from the services or over HTTP). */
export function apiErrorOf(err: unknown): { error: string; message: string; details?: Record<string, unknown> } | undefined {
  if (!(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !Object.hasOwn(ERROR_STATUS, code)) return undefined;
  const details = (err as { details?: unknown }).details;
  return {
    error: code,
    message: err.message,
    ...(details !== null && typeof details === 'object' ? { details: details as Record<string, unknown> } : {}),
  };
}

/** Finds the tool and checks its arguments; throws unknown_tool or invalid_arguments. */
export function prepareCall(definitions: ToolDefinition[], name: string, args: unknown): { definition: ToolDefinition; args: Record<string, unknown> } {
  const definition = definitions.find((d) => d.name === name);
  if (!definition) {
    throw new AppError('unknown_tool', `there is no tool "${name}"; the tools are ${definitions.map((d) => d.name).join(', ')}`);
  }
  // OpenAI's tool calls carry their arguments as JSON text; take them as they come.
  if (typeof args === 'string') {
    try {
      args = args.trim() === '' ? {} : (JSON.parse(args) as unknown);
    } catch {
      throw new AppError('invalid_arguments', `the arguments of ${name} are not valid JSON`, { errors: [{ field: 'arguments', message: 'is not valid JSON' }] });
    }
  }
  if (args !== undefined && (typeof args !== 'object' || args === null || Array.isArray(args))) {
    throw new AppError('invalid_arguments', `the arguments of ${name} must be a JSON object`, {
      errors: [{ field: 'arguments', message: 'must be an object' }],
    });
  }
  // Models often send null for an optional argument they mean to leave out.
  const given = Object.fromEntries(Object.entries((args ?? {}) as Record<string, unknown>).filter(([, v]) => v !== null));
  const [valid, issues] = Schema.Errors(definition.input_schema, given);
  if (!valid) {
    const errors = issues
      // `additionalProperties: false` is reported twice: once per property, once for the object.
      .filter((issue) => issue.keyword !== 'boolean')
      .map((issue) => describeIssue(issue as unknown as SchemaIssue));
    const first = errors[0] ?? { field: 'arguments', message: 'the arguments are not valid' };
    throw new AppError(
      'invalid_arguments',
      `${name}: ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more problem(s), see details)` : ''}`,
      { errors },
    );
  }
  return { definition, args: given };
}

interface SchemaIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message: string;
}

function describeIssue(issue: SchemaIssue): { field: string; message: string } {
  const at = issue.instancePath.replace(/^\//, '').replaceAll('/', '.');
  const field = (name: string) => ['arguments', name].filter(Boolean).join('.');
  switch (issue.keyword) {
    case 'required': {
      const missing = (issue.params.requiredProperties as string[] | undefined) ?? [];
      return { field: field(missing[0] ?? at), message: `${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} required` };
    }
    case 'additionalProperties': {
      const extra = (issue.params.additionalProperties as string[] | undefined) ?? [];
      return { field: field(extra[0] ?? at), message: `unknown argument${extra.length === 1 ? '' : 's'} ${extra.join(', ')}` };
    }
    case 'pattern':
      return { field: field(at), message: `${at} has a form that is not allowed (must match ${String(issue.params.pattern)})` };
    default:
      return { field: field(at), message: `${at || 'arguments'} ${issue.message}` };
  }
}

/** Runs a call whose arguments prepareCall accepted, and words the outcome for a model. */
export async function executeCall(
  backend: ToolBackend,
  scope: ToolScope,
  limits: ToolLimits,
  prepared: { definition: ToolDefinition; args: Record<string, unknown> },
  options: CallOptions,
): Promise<ToolResult> {
  const { definition, args } = prepared;
  const ref: RoomRef =
    scope.kind === 'room'
      ? { profile: scope.profileId, room: scope.roomId }
      : { profile: typeof args.profile === 'string' ? args.profile : DEFAULT_PROFILE, room: String(args.room) };
  const url = (relative: string) => `${options.publicBaseUrl ?? ''}${relative}`;
  try {
    switch (definition.name) {
      case 'run_command': {
        const input = {
          command: String(args.command),
          ...(typeof args.cwd === 'string' ? { cwd: args.cwd } : {}),
          ...(typeof args.timeout_s === 'number' ? { timeout_s: args.timeout_s } : {}),
        };
        if (args.background === true) {
          const status = await backend.startCommand(ref, input);
          const text = [
            `Started in the background: command_id ${status.command_id}. It runs until it ends${input.timeout_s === undefined ? '' : `, reaches ${input.timeout_s} s`} or is stopped with kill_command.`,
            `Check it with command_output (command_id ${status.command_id}, offset 0).`,
          ].join('\n');
          return { content: [{ type: 'text', text }], isError: false, structured: status };
        }
        const result = await backend.runCommand(ref, input);
        return { content: [{ type: 'text', text: commandText(result, url) }], isError: result.result.exit_code !== 0, structured: result };
      }
      case 'command_output': {
        const status = await backend.commandStatus(ref, String(args.command_id), typeof args.offset === 'number' ? args.offset : 0);
        return { content: [{ type: 'text', text: statusText(status, url) }], isError: false, structured: status };
      }
      case 'kill_command': {
        const signal = (typeof args.signal === 'string' ? args.signal : 'KILL') as CommandSignal;
        const status = await backend.killCommand(ref, String(args.command_id), signal);
        const text =
          status.state === 'running'
            ? `Sent ${signal} to command ${status.command_id}; it is still running (it may be cleaning up): check it with command_output.`
            : `Command ${status.command_id} is ${status.state}${status.exit_code === null ? '' : ` (exit code ${status.exit_code})`}.`;
        return { content: [{ type: 'text', text }], isError: false, structured: status };
      }
      case 'read_file': {
        const file = await backend.readFile(ref, String(args.path));
        return fileResult(file, args, limits, url);
      }
      case 'write_file': {
        const encoding = args.encoding === 'base64' ? 'base64' : 'utf-8';
        const content = String(args.content);
        if (encoding === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(content.replace(/\s+/g, ''))) {
          throw new AppError('validation_error', 'content is not valid base64; send text with encoding "utf-8"');
        }
        const written = await backend.writeFile(ref, String(args.path), Buffer.from(content, encoding === 'base64' ? 'base64' : 'utf8'));
        const verb = written.status === 'created' ? 'Created' : 'Replaced';
        return {
          content: [{ type: 'text', text: `${verb} ${written.file_path} (${written.size} bytes). URL: ${url(publicUrl(written.instance_id, written.file_path))}` }],
          isError: false,
          structured: written,
        };
      }
      case 'list_files': {
        const listing = await backend.listFiles(ref, typeof args.path === 'string' ? args.path : '.');
        return { content: [{ type: 'text', text: listingText(listing) }], isError: false, structured: listing };
      }
      case 'delete_file': {
        const deleted = await backend.deleteFile(ref, String(args.path));
        return { content: [{ type: 'text', text: `Deleted ${deleted.file_path}.` }], isError: false, structured: deleted };
      }
      case 'create_instance': {
        const info = await backend.createInstance(ref);
        const how = info.created === false ? 'already had a machine' : info.created === true ? 'has a new machine' : 'has a machine';
        return { content: [{ type: 'text', text: `Room "${ref.room}" ${how}.\n${instanceText(info)}` }], isError: false, structured: info.instance };
      }
      case 'get_instance': {
        const info = await backend.getInstance(ref);
        return { content: [{ type: 'text', text: instanceText(info) }], isError: false, structured: info.instance };
      }
      case 'delete_instance': {
        const info = await backend.deleteInstance(ref);
        const { instance_id: id, state, failure_reason: reason } = info.instance;
        const text =
          state === 'stopped'
            ? `Machine ${id} of room "${ref.room}" is deleted, with everything on it.`
            : `Deleting machine ${id} of room "${ref.room}" ended in state ${state}.${reason ? ` ${reason}` : ''}`;
        return {
          content: [{ type: 'text', text }],
          isError: info.instance.state !== 'stopped',
          structured: info.instance,
        };
      }
    }
  } catch (err) {
    const api = apiErrorOf(err);
    if (!api || !options.reportAsResult(api.error)) throw err;
    const hint = scope.kind === 'organization' ? TOOL_HINTS[api.error]?.(ref) : undefined;
    return { content: [{ type: 'text', text: `Error ${api.error}: ${api.message}${hint ? `\n${hint}` : ''}` }], isError: true, structured: api };
  }
}

/** What to do next, in terms of the tools, where the API's message speaks of endpoints. */
const TOOL_HINTS: Record<string, (ref: RoomRef) => string> = {
  instance_not_found: (ref) => `Room "${ref.room}" has no machine: create it with create_instance.`,
  instance_not_ready: (ref) => `get_instance shows the state of room "${ref.room}": wait until it is ready, or create_instance again if it failed.`,
  profile_not_found: () => `Leave profile out to use "${DEFAULT_PROFILE}", or give the name or id of one of the organization's profiles.`,
};

// ---------------------------------------------------------------------------
// Results, worded for a model

function commandText(result: CommandResult, url: (relative: string) => string): string {
  const r = result.result;
  const lines: string[] = [];
  lines.push(
    r.timed_out
      ? `Exit code: ${r.exit_code} (the command reached its time limit and was killed)`
      : `Exit code: ${r.exit_code}${r.exit_code === 0 ? '' : ' (failed)'}`,
  );
  if (r.output === '') {
    lines.push('Output: (none)');
  } else {
    lines.push('Output:');
    lines.push(r.output.endsWith('\n') ? r.output.slice(0, -1) : r.output);
  }
  if (r.output_truncated) lines.push(`(The command printed ${r.output_bytes} bytes; the middle was cut, keeping the first and last part.)`);
  if (r.files_changed_total === 0) {
    lines.push('Files changed: none');
  } else {
    lines.push(`Files changed (${r.files_changed_total}):`);
    for (const change of r.files_changed) {
      const facts = [change.size === undefined ? undefined : `${change.size} bytes`, change.mime_type].filter(Boolean).join(', ');
      lines.push(`${change.status} ${change.path}${facts ? ` (${facts})` : ''}${change.public_url ? ` ${url(change.public_url)}` : ''}`);
    }
    if (r.files_changed_truncated) lines.push(`... and ${r.files_changed_total - r.files_changed.length} more, not listed`);
  }
  return lines.join('\n');
}

/** A command's status for a model: its state, the output since the offset asked for, where to read on. */
function statusText(status: CommandStatus, url: (relative: string) => string): string {
  const lines: string[] = [];
  const ended = status.state !== 'running';
  lines.push(
    ended
      ? `Command ${status.command_id} has ended: ${status.state}${status.exit_code === null ? '' : `, exit code ${status.exit_code}`}${status.duration_ms === null ? '' : ` after ${(status.duration_ms / 1000).toFixed(1)} s`}.`
      : `Command ${status.command_id} is still running (started ${status.started_at}).`,
  );
  if (!status.output_available) {
    lines.push('Its output is no longer kept (15 minutes after the end, or the server restarted).');
    return lines.join('\n');
  }
  if (status.output === '') lines.push(`No new output from byte ${status.output_offset} (of ${status.output_bytes}).`);
  else {
    lines.push(`Output, bytes ${status.output_offset}-${status.next_offset} of ${status.output_bytes}:`);
    lines.push(status.output.endsWith('\n') ? status.output.slice(0, -1) : status.output);
  }
  if (!ended) lines.push(`Read on with offset ${status.next_offset}.`);
  if (ended && status.files_changed !== null) {
    if (status.files_changed_total === 0) lines.push('Files changed: none');
    else {
      lines.push(`Files changed (${status.files_changed_total}):`);
      for (const change of status.files_changed) lines.push(`${change.status} ${change.path}${change.public_url ? ` ${url(change.public_url)}` : ''}`);
      if (status.files_changed_truncated) lines.push(`... and ${(status.files_changed_total ?? 0) - status.files_changed.length} more, not listed`);
    }
  }
  return lines.join('\n');
}

function fileResult(file: FileContent, args: Record<string, unknown>, limits: ToolLimits, url: (relative: string) => string): ToolResult {
  const { content, ...meta } = file;
  const structured = meta;
  const where = url(publicUrl(file.instance_id, file.file_path));
  if (file.encoding === 'base64') {
    if (IMAGE_TYPES.has(file.mime_type) && file.size <= MAX_INLINE_IMAGE_BYTES) {
      return {
        content: [
          { type: 'text', text: `Image ${file.file_path} (${file.mime_type}, ${file.size} bytes). URL: ${where}` },
          { type: 'image', data: content, mimeType: file.mime_type },
        ],
        isError: false,
        structured,
      };
    }
    const why = IMAGE_TYPES.has(file.mime_type) ? `an image larger than ${size(MAX_INLINE_IMAGE_BYTES)}` : 'binary';
    return {
      content: [
        {
          type: 'text',
          text: `${file.file_path} is ${why} (${file.mime_type}, ${file.size} bytes) and is not shown. URL: ${where}\nInspect it with run_command (e.g. \`file\`, \`xxd ${file.file_path} | head\`).`,
        },
      ],
      isError: false,
      structured,
    };
  }
  if (content === '') return { content: [{ type: 'text', text: `${file.file_path} is empty (0 bytes).` }], isError: false, structured };

  // Lines keep their terminators, so the selection is the exact bytes of the file.
  const lines = content.split(/(?<=\n)/);
  const offset = typeof args.offset === 'number' ? args.offset : 1;
  const limit = typeof args.limit === 'number' ? args.limit : lines.length;
  if (offset > lines.length) {
    return {
      content: [{ type: 'text', text: `Error: ${file.file_path} has ${lines.length} line(s); offset ${offset} is past its end.` }],
      isError: true,
      structured,
    };
  }
  const chosen = lines.slice(offset - 1, offset - 1 + limit);
  let text = '';
  let bytes = 0;
  let taken = 0;
  for (const line of chosen) {
    const n = Buffer.byteLength(line);
    if (bytes + n > limits.maxOutputBytes) break;
    text += line;
    bytes += n;
    taken++;
  }
  let cutLine = false;
  if (taken === 0) {
    // One line longer than the whole budget: its start, cut on a character boundary.
    text = new TextDecoder().decode(Buffer.from(chosen[0] ?? '').subarray(0, limits.maxOutputBytes)).replace(/\uFFFD$/, '');
    taken = 1;
    cutLine = true;
  }
  const last = offset - 1 + taken;
  const result: ToolContent[] = [{ type: 'text', text }];
  if (cutLine) {
    result.push({
      type: 'text',
      text: `[Line ${offset} of ${lines.length} is longer than ${size(limits.maxOutputBytes)}; only its start is shown. Read the rest with run_command (e.g. \`cut -c\`, \`head -c\`).]`,
    });
  } else if (taken < chosen.length) {
    result.push({
      type: 'text',
      text: `[Lines ${offset}-${last} of ${lines.length}: one read returns at most ${size(limits.maxOutputBytes)}. Read on with offset=${last + 1}.]`,
    });
  } else if (offset > 1 || last < lines.length) {
    result.push({ type: 'text', text: `[Lines ${offset}-${last} of ${lines.length}.]` });
  }
  return { content: result, isError: false, structured };
}

function listingText(listing: DirectoryListing): string {
  if (listing.entries.length === 0) return `${listing.path} is empty.`;
  const width = Math.max(...listing.entries.map((e) => String(e.size).length));
  const lines = [`${listing.path} (${listing.entries.length} entries):`];
  for (const e of listing.entries) {
    lines.push(`${e.type.padEnd(9)} ${String(e.size).padStart(width)} ${e.mode.padStart(4, '0')} ${e.mtime} ${e.name}${e.type === 'directory' ? '/' : ''}`);
  }
  if (listing.truncated) lines.push(`(only the first ${listing.entries.length} entries are listed; use run_command with ls or find to see the rest)`);
  return lines.join('\n');
}

function instanceText(info: InstanceInfo): string {
  const { instance, profile } = info;
  const lines = [`Machine ${instance.instance_id} (profile "${profile.name}") is ${instance.state}.`];
  if (instance.state === 'failed' && instance.failure_reason) lines.push(`Why it failed: ${instance.failure_reason}`);
  if (instance.state !== 'ready' && instance.state !== 'failed' && instance.state !== 'stopped') {
    lines.push(instance.progress ? `Now: ${instance.progress}` : 'It is still being created; ask again shortly.');
  }
  lines.push(
    `Image: ${profile.image}. User: ${profile.user} (sudo without a password). Home and working directory: ${profile.home}.`,
    `Commands time out after ${profile.commandTimeoutS} s. Network: ${profile.egress === 'internet' ? 'internet access' : 'none'}.`,
    `Memory ${instance.resources.memory_mb} MiB, ${instance.resources.vcpus} CPU(s), disk ${instance.resources.disk_mb} MiB.`,
  );
  return lines.join('\n');
}
